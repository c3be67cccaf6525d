/**
 * The tracking store's write lock (lib/tracking/lock.ts): one writer per store, refusals that
 * name the holder, stale locks taken over with a notice, including a holder in another process
 * of this runtime that is killed with SIGKILL.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { StoreError } from "../lib/errors.ts";
import {
  acquireStoreLock,
  CORRUPT_STALE_MS,
  GUARD_STALE_MS,
  inspectStoreLock,
  isHolderAlive,
  LOCK_FILE,
  type LockHolder,
  type LockStep,
  readStoreLock,
} from "../lib/tracking/lock.ts";
import { ManualLockClock } from "./fixtures/manual_clock.ts";
import { exited, startFixture } from "./fixtures/tracking/harness.ts";

const HOLD_FIXTURE = fileURLToPath(new URL("./fixtures/lock/hold_lock.ts", import.meta.url));
const STOP_FIXTURE = fileURLToPath(
  new URL("./fixtures/tracking/stop_in_lock.ts", import.meta.url),
);
const HOST = os.hostname();

let root = "";
let counter = 0;
before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-lock-"));
});
after(() => {
  if (root !== "") fs.rmSync(root, { recursive: true, force: true });
});

/** A fresh store folder (created) for one test. */
function storeDir(): string {
  const dir = path.join(root, `store-${++counter}`);
  fs.mkdirSync(dir);
  return dir;
}

function lockFile(dir: string): string {
  return path.join(dir, LOCK_FILE);
}

function writeHolder(dir: string, holder: LockHolder): string {
  const raw = JSON.stringify(holder);
  fs.writeFileSync(lockFile(dir), raw);
  return raw;
}

/** Set a file's modification time `ms` milliseconds into the past. */
function age(file: string, ms: number): void {
  const when = new Date(Date.now() - ms);
  fs.utimesSync(file, when, when);
}

function refusedWith(pattern: RegExp, dir: string): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof StoreError, `expected a StoreError, got ${String(error)}`);
    assert.equal(error.path, dir);
    assert.match(error.message, pattern);
    return true;
  };
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The pid of a process of this runtime that has run and exited (and been reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["--version"], { stdio: "ignore" });
  const pid = child.pid;
  await exited(child);
  assert.ok(pid !== undefined && pid > 0);
  return pid;
}

describe("acquireStoreLock", () => {
  it("creates blockwise.lock holding the LockHolder, and release removes it", () => {
    const dir = storeDir();
    const before = Date.now();
    const lock = acquireStoreLock(dir, { command: "blockwise run p.ts" });
    assert.equal(lock.path, lockFile(dir));
    const holder = JSON.parse(fs.readFileSync(lock.path, "utf8")) as LockHolder;
    assert.equal(holder.pid, process.pid);
    assert.equal(holder.host, HOST);
    assert.equal(holder.command, "blockwise run p.ts");
    assert.equal(new Date(holder.started_at).toISOString(), holder.started_at);
    assert.ok(Date.parse(holder.started_at) >= before - 1000);
    assert.deepEqual(lock.holder, holder);
    assert.deepEqual(readStoreLock(dir), holder);
    assert.equal(isHolderAlive(holder), true);
    lock.release();
    assert.equal(fs.existsSync(lock.path), false);
    lock.release(); // idempotent
    assert.equal(readStoreLock(dir), null);
    const again = acquireStoreLock(dir);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    again.release();
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  it("creates a missing store folder", () => {
    const dir = path.join(root, "missing", "nested", "store");
    const lock = acquireStoreLock(dir);
    assert.ok(fs.existsSync(lockFile(dir)));
    lock.release();
  });

  it("refuses a second acquire in the same process, naming pid and host", () => {
    const dir = storeDir();
    const first = acquireStoreLock(dir, { command: "first run" });
    const raw = fs.readFileSync(first.path, "utf8");
    assert.throws(
      () => acquireStoreLock(dir, { command: "second run" }),
      refusedWith(
        new RegExp(
          `^Tracking store ${
            escape(dir)
          } is already in use by this process: pid ${process.pid} on host ${
            escape(HOST)
          } \\(started .*, command "first run"\\)`,
        ),
        dir,
      ),
    );
    assert.equal(fs.readFileSync(first.path, "utf8"), raw);
    first.release();
    acquireStoreLock(dir).release();
  });

  it("takes over a stale lock of a dead pid on this host, with a notice", async () => {
    const dir = storeDir();
    const pid = await deadPid();
    const stale: LockHolder = {
      pid,
      host: HOST,
      started_at: "2026-12-02T10:00:00.000Z",
      command: "blockwise run crashed.ts",
    };
    writeHolder(dir, stale);
    assert.equal(isHolderAlive(stale), false);
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.deepEqual(notices, [
      `Took over a stale lock on ${dir} left by pid ${pid} on host ${HOST} (started 2026-12-02T10:00:00.000Z), which is no longer running`,
    ]);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    assert.deepEqual(fs.readdirSync(dir), [LOCK_FILE]); // no temporary or guard file left
    lock.release();
    assert.equal(fs.existsSync(lockFile(dir)), false);
  });

  it(
    "takes over a lock whose run was killed with its parent and is not reaped yet (a zombie)",
    { skip: process.platform !== "linux" && "zombies are read from /proc" },
    async (t) => {
      // The shell's background child exits after the shell has exec'd `sleep` in its place,
      // which never reaps it, so it stays a zombie: kill(pid, 0) still succeeds on it. (A child
      // that exits at once may be reaped by the shell itself before the exec.)
      const parent = spawn("/bin/sh", ["-c", "sleep 0.3 & echo $!; exec sleep 30"]);
      t.after(() => parent.kill("SIGKILL"));
      const pid = await new Promise<number>((resolve) =>
        parent.stdout.once("data", (d: Buffer) => resolve(Number(String(d).trim())))
      );
      const state = () => /\) (\S) /.exec(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1];
      for (let i = 0; i < 1000 && state() !== "Z"; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(state(), "Z", `process ${pid} did not become a zombie`);
      assert.doesNotThrow(() => process.kill(pid, 0), "the zombie's pid still answers");
      const dir = storeDir();
      const holder: LockHolder = {
        pid,
        host: HOST,
        started_at: new Date().toISOString(),
        command: "blockwise run killed.ts",
      };
      writeHolder(dir, holder);
      assert.equal(isHolderAlive(holder), false);
      const lock = acquireStoreLock(dir, { onNotice: () => {} });
      assert.equal(readStoreLock(dir)?.pid, process.pid);
      lock.release();
    },
  );

  it("takes over a lock naming this pid from before this process started", () => {
    const dir = storeDir();
    const started = new Date(Date.now() - process.uptime() * 1000 - 3_600_000).toISOString();
    writeHolder(dir, { pid: process.pid, host: HOST, started_at: started, command: "old" });
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.equal(notices.length, 1);
    assert.match(notices[0] ?? "", /an earlier process with this pid is no longer running$/);
    lock.release();
  });

  it("refuses a lock naming another host, saying when to remove it", () => {
    const dir = storeDir();
    const holder: LockHolder = {
      pid: 1234,
      host: `${HOST}-elsewhere`,
      started_at: "2026-12-02T10:00:00Z",
      command: "blockwise run p.ts",
    };
    const raw = writeHolder(dir, holder);
    assert.equal(isHolderAlive(holder), "unknown");
    assert.throws(
      () => acquireStoreLock(dir),
      refusedWith(
        new RegExp(
          `^Tracking store ${escape(dir)} is in use by another run: pid 1234 on host ${
            escape(holder.host)
          } \\(started 2026-12-02T10:00:00Z, command "blockwise run p\\.ts"\\).*Wait for that run to finish, or if it is no longer running on ${
            escape(holder.host)
          }, remove ${escape(lockFile(dir))}$`,
        ),
        dir,
      ),
    );
    assert.equal(fs.readFileSync(lockFile(dir), "utf8"), raw);
  });

  it("treats an existing pid on this host as alive (pid 1)", () => {
    const holder: LockHolder = { pid: 1, host: HOST, started_at: "x", command: "init" };
    assert.equal(isHolderAlive(holder), true);
    const dir = storeDir();
    writeHolder(dir, holder);
    assert.throws(
      () => acquireStoreLock(dir),
      refusedWith(/pid 1 on host .*which is still running\. Wait for that run/, dir),
    );
  });

  it("takes over a lock whose pid now belongs to a process started after the lock was taken", (t) => {
    if (!fs.existsSync("/proc/self/stat")) return t.skip("needs /proc");
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      const dir = storeDir();
      // The lock was taken an hour ago by a run whose pid the sleep got later.
      const reused: LockHolder = {
        pid: child.pid!,
        host: HOST,
        started_at: new Date(Date.now() - 3_600_000).toISOString(),
        command: "/opt/blockwise run old.ts",
      };
      writeHolder(dir, reused);
      assert.equal(isHolderAlive(reused), false);
      const notices: string[] = [];
      const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
      assert.match(
        notices[0] ?? "",
        new RegExp(`Took over a stale lock on .* left by pid ${child.pid}`),
      );
      lock.release();
      // The same pid, with a lock taken after the process started, is its own: alive.
      assert.equal(isHolderAlive({ ...reused, started_at: new Date().toISOString() }), true);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("refuses a live holder in another process, then takes over once it is killed", async (t) => {
    const dir = storeDir();
    const started = await startFixture(HOLD_FIXTURE, [dir]);
    if (started === null) return t.skip("needs a runtime that runs TypeScript fixtures");
    const { child, line, done } = started;
    try {
      assert.equal(line, `locked ${child.pid}`);
      const holder = readStoreLock(dir);
      assert.ok(holder !== null);
      assert.equal(holder.pid, child.pid);
      assert.equal(holder.host, HOST);
      assert.equal(holder.command, "hold_lock fixture");
      assert.equal(isHolderAlive(holder), true);
      assert.throws(
        () => acquireStoreLock(dir),
        refusedWith(
          new RegExp(
            `in use by another run: pid ${child.pid} on host ${
              escape(HOST)
            } \\(started .*, command "hold_lock fixture"\\), which is still running`,
          ),
          dir,
        ),
      );
    } finally {
      child.kill("SIGKILL");
    }
    const { signal } = await done;
    assert.equal(signal, "SIGKILL");
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.equal(notices.length, 1);
    assert.match(
      notices[0] ?? "",
      new RegExp(`left by pid ${child.pid} on host ${escape(HOST)} .*no longer running$`),
    );
    lock.release();
  });

  it("another process is refused while this one holds the lock", async (t) => {
    const dir = storeDir();
    const lock = acquireStoreLock(dir, { command: "parent run" });
    try {
      const started = await startFixture(HOLD_FIXTURE, [dir]);
      if (started === null) return t.skip("needs a runtime that runs TypeScript fixtures");
      const { code } = await started.done;
      assert.equal(code, 3);
      assert.match(
        started.line,
        new RegExp(`^refused .*pid ${process.pid} on host .*command "parent run"`),
      );
      assert.equal(readStoreLock(dir)?.pid, process.pid);
    } finally {
      lock.release();
    }
  });
});

describe("racing runs", () => {
  for (const stale of [false, true]) {
    it(`exactly one of several processes wins ${stale ? "a stale lock" : "a free store"}`, async (t) => {
      const dir = storeDir();
      if (stale) {
        const pid = await deadPid();
        writeHolder(dir, { pid, host: HOST, started_at: "2026-01-01T00:00:00Z", command: "dead" });
      }
      const runs = await Promise.all(
        Array.from({ length: 6 }, () => startFixture(HOLD_FIXTURE, [dir])),
      );
      try {
        if (runs.some((r) => r === null)) return t.skip("needs a runtime that runs fixtures");
        const lines = runs.map((r) => r?.line ?? "");
        const winners = runs.filter((r) => r?.line.startsWith("locked "));
        assert.equal(winners.length, 1, lines.join("\n"));
        const winner = winners[0]?.child.pid;
        assert.equal(readStoreLock(dir)?.pid, winner);
        for (const line of lines) {
          if (line.startsWith("locked ")) continue;
          assert.match(line, /^refused Tracking store .* (in use|being locked) by another run/);
        }
      } finally {
        for (const r of runs) r?.child.kill("SIGKILL");
        await Promise.all(runs.map((r) => r?.done));
      }
      assert.deepEqual(fs.readdirSync(dir), [LOCK_FILE]);
    });
  }
});

describe("corrupt lock files", () => {
  it("takes over an old empty lock file (a crash during creation)", () => {
    const dir = storeDir();
    fs.writeFileSync(lockFile(dir), "");
    age(lockFile(dir), CORRUPT_STALE_MS + 60_000);
    assert.equal(inspectStoreLock(dir).state, "corrupt");
    assert.equal(readStoreLock(dir), null);
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.equal(notices.length, 1);
    assert.match(notices[0] ?? "", /^Took over a stale lock on .*blockwise\.lock was empty/);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    lock.release();
  });

  it("takes over an old lock file that is not a lock", () => {
    for (
      const raw of ['{"pid": 12', "[1,2]", '{"pid":0,"host":"h","started_at":"","command":""}']
    ) {
      const dir = storeDir();
      fs.writeFileSync(lockFile(dir), raw);
      age(lockFile(dir), CORRUPT_STALE_MS + 1_000);
      const notices: string[] = [];
      const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
      assert.match(notices[0] ?? "", /was not a valid lock/, raw);
      lock.release();
    }
  });

  it("refuses a fresh empty lock file: another run is creating it", () => {
    const dir = storeDir();
    fs.writeFileSync(lockFile(dir), "");
    const clock = new ManualLockClock(fs.statSync(lockFile(dir)).mtimeMs);
    assert.throws(
      () => acquireStoreLock(dir, { clock }),
      refusedWith(/is being locked by another run: its lock file .* is empty and was written/, dir),
    );
    assert.ok(clock.slept > 0, "it waited for the lock to settle before refusing");
    assert.ok(clock.slept < CORRUPT_STALE_MS);
    assert.equal(fs.readFileSync(lockFile(dir), "utf8"), "");
  });

  it("waits for a lock being created, then judges the holder it names", () => {
    const dir = storeDir();
    fs.writeFileSync(lockFile(dir), "");
    const holder: LockHolder = {
      pid: 777,
      host: `${HOST}-elsewhere`,
      started_at: "2026-12-02T10:00:00Z",
      command: "racing run",
    };
    // The other run writes its holder while this one waits for the lock to settle.
    const clock = new ManualLockClock(
      fs.statSync(lockFile(dir)).mtimeMs,
      () => fs.writeFileSync(lockFile(dir), JSON.stringify(holder)),
    );
    assert.throws(
      () => acquireStoreLock(dir, { clock }),
      refusedWith(
        /in use by another run: pid 777 on host .*-elsewhere .*command "racing run"/,
        dir,
      ),
    );
    assert.ok(clock.slept > 0 && clock.slept < CORRUPT_STALE_MS, "it judged it again after a wait");
  });
});

describe("takeover guard", () => {
  it("waits for, then refuses, a takeover in progress by another run", async () => {
    const dir = storeDir();
    const pid = await deadPid();
    const raw = writeHolder(dir, {
      pid,
      host: HOST,
      started_at: "2026-01-01T00:00:00Z",
      command: "",
    });
    const guard = `${lockFile(dir)}.takeover`;
    fs.writeFileSync(guard, "");
    const clock = new ManualLockClock(fs.statSync(guard).mtimeMs);
    assert.throws(
      () => acquireStoreLock(dir, { clock }),
      refusedWith(/another run is taking over its stale lock right now/, dir),
    );
    assert.ok(clock.slept > 0 && clock.slept < GUARD_STALE_MS);
    assert.equal(fs.readFileSync(lockFile(dir), "utf8"), raw);
  });

  it("removes a guard left by a crash and takes over", async () => {
    const dir = storeDir();
    const pid = await deadPid();
    writeHolder(dir, { pid, host: HOST, started_at: "2026-01-01T00:00:00Z", command: "" });
    const guard = `${lockFile(dir)}.takeover`;
    fs.writeFileSync(guard, "");
    age(guard, GUARD_STALE_MS + 5_000);
    const lock = acquireStoreLock(dir);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    assert.equal(fs.existsSync(guard), false);
    lock.release();
  });
});

describe("a process SIGKILLed inside lock handling", () => {
  /**
   * Run the stop_in_lock fixture on `dir` until it stops at `step`, SIGKILL it there, and
   * return its pid: the store is left exactly as a run killed at that moment leaves it.
   */
  async function killAt(dir: string, step: LockStep, linkless = false): Promise<number | null> {
    const started = await startFixture(STOP_FIXTURE, [
      dir,
      step,
      ...(linkless ? ["linkless"] : []),
    ]);
    if (started === null) return null;
    started.child.kill("SIGKILL");
    const { signal } = await started.done;
    assert.equal(started.line, `at ${step}`, "the fixture stopped where it was asked to");
    assert.equal(signal, "SIGKILL");
    return started.child.pid ?? null;
  }

  /** The files a killed creator left: creator (.new) and rename (.tmp) files. */
  function leftovers(dir: string): string[] {
    return fs.readdirSync(dir).filter((n) => /\.(new|tmp)$/.test(n));
  }

  it("killed before linking its lock: no lock, and the next run cleans its creator file", async (t) => {
    const dir = storeDir();
    const pid = await killAt(dir, "lock-creator-written");
    if (pid === null) return t.skip("needs a runtime that runs TypeScript fixtures");
    assert.deepEqual(leftovers(dir).length, 1, "the killed run left its creator file");
    assert.equal(inspectStoreLock(dir).state, "free");
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.deepEqual(notices, []);
    assert.deepEqual(fs.readdirSync(dir), [LOCK_FILE], "nothing but the lock is left");
    lock.release();
  });

  it("killed between creating and writing its lock (no hard links): taken over at once", async (t) => {
    const dir = storeDir();
    const pid = await killAt(dir, "lock-created-empty", true);
    if (pid === null) return t.skip("needs a runtime that runs TypeScript fixtures");
    // A fresh, empty lock: only its creator file says who made it, and that run is gone.
    assert.equal(fs.readFileSync(lockFile(dir), "utf8"), "");
    assert.equal(leftovers(dir).length, 1);
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.equal(notices.length, 1);
    assert.match(notices[0] ?? "", /^Took over a stale lock on .*blockwise\.lock was empty/);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    assert.deepEqual(fs.readdirSync(dir), [LOCK_FILE]);
    lock.release();
  });

  it("a fresh empty lock whose creator still runs is refused, then taken over once it is killed", async (t) => {
    const dir = storeDir();
    const started = await startFixture(STOP_FIXTURE, [dir, "lock-created-empty", "linkless"]);
    if (started === null) return t.skip("needs a runtime that runs TypeScript fixtures");
    try {
      assert.equal(started.line, "at lock-created-empty");
      const clock = new ManualLockClock(fs.statSync(lockFile(dir)).mtimeMs);
      assert.throws(
        () => acquireStoreLock(dir, { clock }),
        refusedWith(/is being locked by another run: its lock file .* is empty/, dir),
      );
    } finally {
      started.child.kill("SIGKILL");
    }
    await started.done;
    const lock = acquireStoreLock(dir);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    lock.release();
  });

  for (
    const [step, linkless] of [["guard-created", false], ["guard-created-empty", true]] as const
  ) {
    it(`killed inside a takeover (${step}): the next run takes the stale lock over`, async (t) => {
      const dir = storeDir();
      const dead = await deadPid();
      writeHolder(dir, { pid: dead, host: HOST, started_at: "2026-01-01T00:00:00Z", command: "" });
      const pid = await killAt(dir, step, linkless);
      if (pid === null) return t.skip("needs a runtime that runs TypeScript fixtures");
      assert.ok(fs.existsSync(`${lockFile(dir)}.takeover`), "the killed run left its guard");
      assert.equal(readStoreLock(dir)?.pid, dead, "the stale lock was not replaced yet");
      const notices: string[] = [];
      const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
      assert.match(notices[0] ?? "", new RegExp(`left by pid ${dead} .*no longer running$`));
      assert.equal(readStoreLock(dir)?.pid, process.pid);
      assert.deepEqual(fs.readdirSync(dir), [LOCK_FILE], "guard and creator files removed");
      lock.release();
    });
  }

  it("killed after replacing the stale lock, before removing the guard: taken over", async (t) => {
    const dir = storeDir();
    const dead = await deadPid();
    writeHolder(dir, { pid: dead, host: HOST, started_at: "2026-01-01T00:00:00Z", command: "" });
    const pid = await killAt(dir, "lock-replaced");
    if (pid === null) return t.skip("needs a runtime that runs TypeScript fixtures");
    assert.equal(readStoreLock(dir)?.pid, pid, "the killed run's lock replaced the stale one");
    assert.ok(fs.existsSync(`${lockFile(dir)}.takeover`));
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { onNotice: (m) => notices.push(m) });
    assert.match(notices[0] ?? "", new RegExp(`left by pid ${pid} .*no longer running$`));
    assert.deepEqual(fs.readdirSync(dir), [LOCK_FILE]);
    lock.release();
  });

  it("a guard naming this very process is stale: it holds no guard between calls", () => {
    const dir = storeDir();
    writeHolder(dir, {
      pid: 999_999_999,
      host: HOST,
      started_at: "2026-01-01T00:00:00Z",
      command: "",
    });
    const guard = `${lockFile(dir)}.takeover`;
    fs.writeFileSync(
      guard,
      JSON.stringify({
        pid: process.pid,
        host: HOST,
        started_at: new Date().toISOString(),
        command: "",
      }),
    );
    const lock = acquireStoreLock(dir);
    assert.equal(readStoreLock(dir)?.pid, process.pid);
    assert.equal(fs.existsSync(guard), false);
    lock.release();
  });
});

describe("release and refresh", () => {
  it("release leaves a lock that is not ours any more", () => {
    const dir = storeDir();
    const lock = acquireStoreLock(dir);
    const other: LockHolder = {
      pid: 4321,
      host: `${HOST}-elsewhere`,
      started_at: "2026-12-02T10:00:00Z",
      command: "other",
    };
    const raw = writeHolder(dir, other);
    lock.release();
    assert.equal(fs.readFileSync(lockFile(dir), "utf8"), raw);
  });

  it("release of an earlier lock leaves a later lock of this process alone", () => {
    const dir = storeDir();
    const first = acquireStoreLock(dir, { command: "first" });
    fs.rmSync(first.path); // someone removed it by hand
    const second = acquireStoreLock(dir, { command: "second" });
    first.release();
    assert.equal(readStoreLock(dir)?.command, "second");
    second.release();
    assert.equal(readStoreLock(dir), null);
  });

  it("refresh confirms, rewrites a removed lock, and throws when another run holds it", () => {
    const dir = storeDir();
    const notices: string[] = [];
    const lock = acquireStoreLock(dir, { command: "r", onNotice: (m) => notices.push(m) });
    const raw = fs.readFileSync(lock.path, "utf8");
    lock.refresh();
    assert.deepEqual(notices, []);
    fs.rmSync(lock.path);
    lock.refresh();
    assert.equal(notices.length, 1);
    assert.match(notices[0] ?? "", /had been removed while this run held it; rewrote it$/);
    assert.equal(fs.readFileSync(lock.path, "utf8"), raw);
    writeHolder(dir, {
      pid: 99,
      host: `${HOST}-elsewhere`,
      started_at: "2026-12-02T10:00:00Z",
      command: "intruder",
    });
    assert.throws(
      () => lock.refresh(),
      refusedWith(/lost its lock .*now held by pid 99 on host .*-elsewhere/, dir),
    );
    lock.release();
    assert.equal(readStoreLock(dir)?.pid, 99);
  });

  it("inspectStoreLock reports free, held and corrupt", () => {
    const dir = storeDir();
    assert.deepEqual(inspectStoreLock(dir), { state: "free" });
    const lock = acquireStoreLock(dir);
    const held = inspectStoreLock(dir);
    assert.equal(held.state, "held");
    lock.release();
    fs.writeFileSync(lockFile(dir), "garbage");
    const corrupt = inspectStoreLock(dir);
    assert.equal(corrupt.state, "corrupt");
    if (corrupt.state === "corrupt") assert.equal(corrupt.raw, "garbage");
    assert.equal(readStoreLock(path.join(root, "no-such-store")), null);
  });
});
