/**
 * A run with temporaries SIGKILLed at every step of the crash table in
 * docs/design/TEMPORARIES.md (crash points through BLOCKWISE_TEST_CRASH_AT), on the chain of
 * tests/fixtures/temporaries.ts (b, c and d temporary):
 *   - before the tombstones are written (`temp:due`), after them (`temp:tombstoned`), after the files
 *     went (`temp:deleted`);
 *   - at every step of the output commit (`commit:*`) in the first run, and again while a forced
 *     reader's deleted inputs are regenerated.
 * Every kill must land (the run dies by SIGKILL: it did not finish first). The next start must
 * repair what the kill left to the end state of a clean run: the same files, the same content
 * hash recorded for every block (`verify --against` a clean run's stores), every committed
 * output intact (`verify`), and a further run runs nothing. Blocks whose commit was durable
 * before the kill never run again.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { type CliResult, describeRun, runCli } from "./fixtures/tracking/harness.ts";
import { manifestOf, ran, runIn } from "./fixtures/outputs.ts";
import { chain, endState, TASKS } from "./fixtures/temporaries.ts";

const newDir = scratchDirs("temporaries-crash");
const SLOW = { timeout: 120_000 };

let clean: Promise<{ dir: string; state: ReturnType<typeof endState> }> | null = null;

/** One clean run of the chain, shared by every test. */
function cleanRun(): Promise<{ dir: string; state: ReturnType<typeof endState> }> {
  clean ??= (async () => {
    const dir = newDir("clean");
    const r = await runIn(dir, chain(dir));
    assert.equal(r.code, 0, describeRun(r));
    return { dir, state: endState(dir) };
  })();
  return clean;
}

/**
 * Blocks whose latest record is a durable commit, as `<task><index>`: done, outputs in place.
 * (A tombstoned block is done too, but runs again when a reader that must run needs it.)
 */
function committed(dir: string): string[] {
  return TASKS.flatMap((t) => {
    const latest = new Map<string, string>();
    for (const r of manifestOf(dir, t)) {
      if (r.t !== "nondeterministic") latest.set(`${t}${r.index[0]}`, r.t);
    }
    return [...latest].filter(([, kind]) => kind === "commit").map(([block]) => block);
  });
}

/** The killed run `killed` must have died by SIGKILL; the next start repairs it to a clean end. */
async function resumesLikeClean(dir: string, killed: CliResult, what: string): Promise<void> {
  assert.equal(killed.signal, "SIGKILL", `${what}: the kill did not land: ${describeRun(killed)}`);
  const before = committed(dir);
  const file = chain(dir);
  const resumed = await runIn(dir, file);
  assert.equal(resumed.code, 0, `${what}, resumed: ${describeRun(resumed)}`);
  for (const block of ran(dir)) {
    assert.ok(
      !before.includes(block),
      `${what}: ${block} committed before the kill, yet ran again`,
    );
  }
  const reference = await cleanRun();
  assert.deepEqual(endState(dir), reference.state, `${what}: the end state of a clean run`);
  const tracking = path.join(dir, "tracking");
  const verify = await runCli(["verify", tracking]);
  assert.equal(verify.code, 0, `${what}: ${describeRun(verify)}`);
  const same = await runCli([
    "verify",
    tracking,
    "--against",
    path.join(reference.dir, "tracking"),
  ]);
  assert.equal(same.code, 0, `${what}: ${describeRun(same)}`);
  const last = await runIn(dir, file);
  assert.equal(last.code, 0, describeRun(last));
  assert.deepEqual(ran(dir), [], `${what}: a further run runs nothing`);
}

const crashAt = (point: string) => ({ BLOCKWISE_TEST_CRASH_AT: point });

describe("temporaries survive SIGKILL at every step", () => {
  const deletion = [
    ["temp:due:2", "before the tombstones are written"],
    ["temp:tombstoned:2", "after a tombstone, before the files go"],
    ["temp:deleted:2", "after the files went"],
  ] as const;
  for (const [point, when] of deletion) {
    it(`killed ${when} (${point}), the next start repairs it`, SLOW, async () => {
      const dir = newDir(point.replaceAll(":", "-"));
      const killed = await runIn(dir, chain(dir), [], crashAt(point));
      assert.ok(committed(dir).length > 0, "the kill came after some commits");
      await resumesLikeClean(dir, killed, point);
    });
  }

  // Batch steps are reached once per group commit, rename and done once per block: the chain
  // commits in at least five groups (one per task level), a forced e2 regenerates 14 blocks in
  // at least four.
  const commit = [
    ["commit:staged", 3, 2],
    ["commit:intent", 3, 2],
    ["commit:rename", 20, 6],
    ["commit:renamed", 3, 2],
    ["commit:recorded", 3, 2],
    ["commit:done", 20, 6],
  ] as const;
  for (const [point, first, regenerating] of commit) {
    it(
      `killed at ${point} while building, then while regenerating: repaired each time`,
      SLOW,
      async () => {
        const dir = newDir(point.replace(":", "-"));
        const file = chain(dir);
        const killed = await runIn(dir, file, [], crashAt(`${point}:${first}`));
        await resumesLikeClean(dir, killed, `${point}:${first} in the first run`);
        // e2 reads d1..d3, which read c0..c4, which read b0..b5: all deleted, all regenerated.
        const forced = await runIn(
          dir,
          file,
          ["--force", "e:4:2"],
          crashAt(`${point}:${regenerating}`),
        );
        assert.ok(
          ran(dir).some((b) => /^[bcd]/.test(b)),
          `${point}: the kill came while regenerating: ${ran(dir)}`,
        );
        await resumesLikeClean(dir, forced, `${point}:${regenerating} while regenerating`);
      },
    );
  }
});
