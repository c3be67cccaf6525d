/**
 * `blockwise verify PATH [--against OTHER] [--json]`: read-only (no lock, nothing written).
 * PATH is one task's store or a tracking directory. Without `--against`, every committed
 * output is re-hashed and compared with the manifest (lib/outputs/verify.ts); with it, the
 * stores of PATH and OTHER are paired by task and compared block by block by content hash.
 *
 * Exit codes: 0 everything matches, or nothing was there to verify (no store records outputs:
 * the closing line says "nothing to verify"); 1 anything differs, is missing or is unpaired
 * (the list says what); 2 PATH does not exist; 3 a store cannot be read.
 *
 * `--json`: `{"stores": [StoreVerification, ...], "ok": bool, "checked": stores re-hashed}`, or with `--against`
 * `{"comparisons": [StoreComparison, ...], "unpaired": [{task, store}], "equivalent": bool}`
 * (fields in lib/outputs/verify.ts and docs/guide/why-blocks-run.md).
 */

import { formatBytes } from "../report/utilization.ts";
import { findStores } from "../tracking/find_stores.ts";
import { readStoreMetadata } from "../tracking/store_metadata.ts";
import {
  compareStores,
  type StoreComparison,
  type StoreVerification,
  verifyStore,
} from "../outputs/verify.ts";
import { EXIT_BLOCKS_FAILED, EXIT_OK } from "./exit_codes.ts";
import { LineWriter } from "./output.ts";

export interface VerifyOptions {
  readonly against?: string;
  readonly json?: boolean;
}

/** Blocks listed per kind of difference in the human output (JSON lists all). */
const LIST_LIMIT = 20;

export async function verifyCommand(target: string, options: VerifyOptions): Promise<number> {
  const out = new LineWriter();
  const code = options.against === undefined
    ? await verifyAll(target, options.json === true, out)
    : await compareAll(target, options.against, options.json === true, out);
  await out.flush();
  return code;
}

async function verifyAll(target: string, json: boolean, out: LineWriter): Promise<number> {
  const results = findStores(target).map((dir) => verifyStore(dir));
  const problems = results.reduce((n, r) => n + r.problems.length, 0);
  // A store with a note (no outputs recorded) was not checked: never count it as matching.
  const checked = results.filter((r) => r.note === null).length;
  if (json) {
    await out.line(JSON.stringify({ stores: results, ok: problems === 0, checked }, null, 2));
  } else {
    for (const r of results) for (const line of formatVerification(r)) await out.line(line);
    const bad = results.filter((r) => r.problems.length > 0).length;
    const stores = (n: number) => `${n} store${n === 1 ? "" : "s"}`;
    const unchecked = results.length - checked;
    await out.line(
      problems > 0
        ? `verify: ${problems} problem${problems === 1 ? "" : "s"} in ${bad} of ${
          stores(results.length)
        }; the next run rebuilds those blocks (its start drops records whose files are missing; for modified files, blockwise reset STORE --roi OFFSET:SHAPE --yes or run --force TASK:OFFSET:SHAPE)`
        : checked === 0
        ? `verify: nothing to verify: ${
          results.length === 0
            ? "no stores found"
            : `no outputs recorded in ${
              results.length === 1 ? "the store" : `any of the ${stores(results.length)}`
            } (a task declares outputs to have them hashed and checked; blockwise status shows which blocks are done)`
        }`
        : `verify: every committed output matches its manifest (${stores(checked)}${
          unchecked === 0 ? "" : `; nothing to verify in ${stores(unchecked)} without outputs`
        })`,
    );
  }
  return problems === 0 ? EXIT_OK : EXIT_BLOCKS_FAILED;
}

export function formatVerification(r: StoreVerification): string[] {
  const head = `task "${r.task}"  ${r.store}`;
  if (r.note !== null) return [`${head}: nothing to verify: ${r.note}`];
  const extra = [
    r.tombstoned > 0 ? `${r.tombstoned} deleted temporaries not checked` : null,
    r.uncommitted > 0
      ? `${r.uncommitted} uncommitted (${
        r.live_run === null ? "the next start reconciles them" : "being committed by the run"
      })`
      : null,
  ].filter((x): x is string => x !== null);
  const lines = [
    `${head}: ${r.blocks} block${r.blocks === 1 ? "" : "s"}, ${r.files} file${
      r.files === 1 ? "" : "s"
    } (${formatBytes(r.bytes)}) re-hashed: ${
      r.problems.length === 0 ? "all match" : `${r.problems.length} differ`
    }${extra.length > 0 ? ` (${extra.join(", ")})` : ""}`,
  ];
  if (r.live_run !== null) {
    lines.push(
      `  a run is writing this store (${r.live_run}): this is a moment of it; blocks it commits are counted, not checked`,
    );
  }
  for (const p of r.problems.slice(0, LIST_LIMIT)) {
    lines.push(
      `  ${r.task}/${p.block}  index (${p.index.join(", ")})  ${p.problem}: ${
        p.file === null ? p.detail : `${p.file}${p.detail === p.problem ? "" : ` (${p.detail})`}`
      }`,
    );
  }
  if (r.problems.length > LIST_LIMIT) {
    lines.push(`  ... and ${r.problems.length - LIST_LIMIT} more (--json lists all)`);
  }
  return lines;
}

async function compareAll(
  target: string,
  against: string,
  json: boolean,
  out: LineWriter,
): Promise<number> {
  const byTask = (dirs: string[]) =>
    new Map(dirs.map((d) => [readStoreMetadata(d).taskId, readStoreMetadata(d).path]));
  const mine = byTask(findStores(target));
  const theirs = byTask(findStores(against));
  const comparisons: StoreComparison[] = [];
  const unpaired: { task: string; store: string }[] = [];
  for (const [task, dir] of mine) {
    const other = theirs.get(task);
    if (other === undefined) unpaired.push({ task, store: dir });
    else comparisons.push(compareStores(dir, other));
  }
  for (const [task, dir] of theirs) if (!mine.has(task)) unpaired.push({ task, store: dir });
  const equivalent = unpaired.length === 0 && comparisons.every((c) => c.equivalent);
  if (json) {
    await out.line(JSON.stringify({ comparisons, unpaired, equivalent }, null, 2));
  } else {
    for (const c of comparisons) {
      await out.line(
        `task "${c.task}": ${c.compared} blocks compared, ${
          c.equivalent
            ? "equivalent"
            : `${c.mismatched.length} differ, ${c.only_in_store.length} only in ${c.store}, ${c.only_in_against.length} only in ${c.against}`
        }`,
      );
      const list = (label: string, keys: readonly string[]) =>
        keys.length === 0
          ? null
          : `  ${label}: ${keys.slice(0, LIST_LIMIT).map((k) => `(${k})`).join(" ")}${
            keys.length > LIST_LIMIT ? ` ... (${keys.length})` : ""
          }`;
      for (
        const line of [
          list("content differs at index", c.mismatched),
          list(`only in ${c.store} at index`, c.only_in_store),
          list(`only in ${c.against} at index`, c.only_in_against),
        ]
      ) if (line !== null) await out.line(line);
    }
    for (const u of unpaired) {
      await out.line(`task "${u.task}": only one side has a store (${u.store})`);
    }
    await out.line(
      equivalent
        ? "verify --against: the stores are equivalent block by block"
        : "verify --against: the stores differ (see above)",
    );
  }
  return equivalent ? EXIT_OK : EXIT_BLOCKS_FAILED;
}
