/**
 * Where a fleet's extra time goes (issue 33): `bench/fleet.ts`'s no-op case run under
 * `perf record -g`, once with 2 workers and once with the fleet, and every sample of the
 * scheduler and of the simulators inside the run itself counted by thread and kind of work
 * (`bench/cpu_profile.ts`): compiled JavaScript, the runtime's own code, the kernel by what it
 * was asked, the JIT compiler threads. Prints a Markdown table of milliseconds on a core, the
 * two runs side by side, and the fleet's extra per launched worker
 * (docs/design/REMOTE.md, "What the fleet's extra CPU is made of").
 *
 *   bun bench/fleet_profile.ts [--workers 2000] [--blocks 2000000] [--sims 2] [--hz 5000]
 *
 * Needs Linux `perf` (Debian: apt-get install linux-perf), allowed to profile this user's
 * processes (/proc/sys/kernel/perf_event_paranoid at most 2), and Bun: JavaScriptCore writes
 * what it compiles to jitdump files (BUN_JSC_useJITDump), which become the /tmp/perf-PID.map
 * files `perf script` names compiled code by. Sampling and the jitdump writer slow both runs by
 * about a tenth; the writer's own time is shown on its own line.
 */

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/mod.ts";
import {
  jitdumpSymbols,
  type Kind,
  KINDS,
  KindTally,
  perfMap,
  PerfScriptReader,
} from "./cpu_profile.ts";

const FLEET_SCRIPT = fileURLToPath(new URL("./fleet.ts", import.meta.url));
const SIDES = ["scheduler", "simulators"] as const;

interface Options {
  readonly workers: number;
  readonly blocks: number;
  readonly sims: number;
  readonly hz: number;
}

/** What `bench/fleet.ts --case` prints that this script reads. */
interface CaseFigures {
  readonly pid: number;
  readonly startedAtMs: number;
  readonly endedAtMs: number;
  readonly wallSeconds: number;
  readonly admitted: number;
}

interface Profile {
  readonly figures: CaseFigures;
  readonly tally: KindTally;
}

function option(args: readonly string[], name: string, fallback: number): number {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isInteger(value) || value <= 0) {
    throw new Error(`${name} takes a positive whole number, got ${JSON.stringify(args[at + 1])}`);
  }
  return value;
}

/** Refuse at once, saying what to install or change, when the profile cannot be taken. */
function checkProfiler(): void {
  if (runtimeName() !== "bun") {
    throw new Error(
      "bench/fleet_profile.ts needs Bun: it names compiled code from JavaScriptCore's jitdump files; run it with bun",
    );
  }
  const version = spawnSync("perf", ["--version"], { encoding: "utf8" });
  if (version.status !== 0) {
    throw new Error(
      "Cannot run perf: install it (Debian: apt-get install linux-perf) and run this again",
    );
  }
  const paranoid = Number(
    fs.readFileSync("/proc/sys/kernel/perf_event_paranoid", "utf8").trim(),
  );
  if (paranoid > 2) {
    throw new Error(
      `perf may not profile this user's processes (perf_event_paranoid is ${paranoid}); allow it with sysctl kernel.perf_event_paranoid=2`,
    );
  }
}

/** Run `command`, streaming its stdout lines to `line`; rejects when it fails. */
function run(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  line: (text: string) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let carry = "";
    let errors = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      const lines = (carry + chunk).split("\n");
      carry = lines.pop()!;
      for (const l of lines) line(l);
    });
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => (errors = (errors + chunk).slice(-4000)));
    child.on("error", reject);
    child.on("close", (code) => {
      if (carry !== "") line(carry);
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args[0]} exited with ${code}:\n${errors}`));
    });
  });
}

/** One case of bench/fleet.ts under perf, its samples counted over the run. */
async function profileCase(o: Options, workers: number): Promise<Profile> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-fleet-profile-"));
  const maps: string[] = [];
  try {
    const data = path.join(dir, "perf.data");
    const spec = { workers, blocks: o.blocks, blockMs: 0, sims: o.sims, perNode: 32 };
    let last = "";
    // perf follows the case's children: the simulators it starts are profiled with it.
    const record = ["record", "-k", "CLOCK_REALTIME", "-F", String(o.hz), "-e", "cpu-clock", "-g"];
    await run(
      "perf",
      [...record, "-o", data, "--", process.execPath, FLEET_SCRIPT, "--case", JSON.stringify(spec)],
      { ...process.env, TMPDIR: dir, BUN_JSC_useJITDump: "1" },
      (text) => {
        if (text.startsWith("{")) last = text;
      },
    );
    if (last === "") {
      throw new Error(
        `the case printed no result under perf; run it alone to see why: bun bench/fleet.ts --case '${
          JSON.stringify(spec)
        }'`,
      );
    }
    const figures = JSON.parse(last) as CaseFigures;
    for (const name of fs.readdirSync(dir)) {
      if (!/^jit-\d+/.test(name)) continue;
      const { pid, symbols } = jitdumpSymbols(fs.readFileSync(path.join(dir, name)));
      const map = `/tmp/perf-${pid}.map`;
      fs.writeFileSync(map, perfMap(symbols));
      maps.push(map);
    }
    const tally = new KindTally(
      figures.startedAtMs / 1000,
      figures.endedAtMs / 1000,
      (pid) => pid === figures.pid ? "scheduler" : "simulators",
    );
    const reader = new PerfScriptReader((sample) => tally.add(sample));
    await run(
      "perf",
      ["script", "-i", data, "-F", "comm,pid,tid,time,ip,sym,dso"],
      process.env,
      (text) => reader.line(text),
    );
    reader.end();
    return { figures, tally };
  } finally {
    for (const map of maps) fs.rmSync(map, { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const o: Options = {
    workers: option(args, "--workers", 2000),
    blocks: option(args, "--blocks", 2_000_000),
    sims: option(args, "--sims", 2),
    hz: option(args, "--hz", 5000),
  };
  checkProfiler();
  const load = os.loadavg().map((l) => l.toFixed(2)).join(", ");
  console.log(
    `${
      o.blocks.toLocaleString("en")
    } no-op blocks, ${o.sims} simulators, perf at ${o.hz} Hz; load average ${load}`,
  );
  const two = await profileCase(o, 2);
  const fleet = await profileCase(o, o.workers);
  const ms = (samples: number) => samples / o.hz * 1000;
  const fmt = (samples: number) => `${Math.round(ms(samples))} ms`;
  const more = (a: number, b: number) => {
    const d = Math.round(ms(b - a));
    return `${d >= 0 ? "+" : ""}${d} ms`;
  };
  console.log(
    `run: ${two.figures.wallSeconds.toFixed(3)} s with 2 workers, ${
      fleet.figures.wallSeconds.toFixed(3)
    } s with ${o.workers} (${fleet.figures.admitted} admitted)\n`,
  );
  console.log(`| on a core | 2 workers | ${o.workers} workers | more |`);
  console.log("|---|---|---|---|");
  for (const side of SIDES) {
    const rows = KINDS.map((kind: Kind) => ({
      kind,
      a: two.tally.of(side, kind),
      b: fleet.tally.of(side, kind),
    })).filter((r) => r.a + r.b > 0).sort((x, y) => (y.b - y.a) - (x.b - x.a));
    for (const r of rows) {
      console.log(`| ${side}: ${r.kind} | ${fmt(r.a)} | ${fmt(r.b)} | ${more(r.a, r.b)} |`);
    }
  }
  const a = two.tally.total;
  const b = fleet.tally.total;
  console.log(`| all | ${fmt(a)} | ${fmt(b)} | ${more(a, b)} |`);
  const perWorker = ms(b - a) * 1000 / (o.workers - 2);
  console.log(`\nThe fleet adds ${Math.round(perWorker)} µs on a core per launched worker.`);
}

try {
  await main();
} catch (error) {
  // What to install, allow or pass differently: one line, not a stack.
  console.error(`fleet_profile: ${(error as Error).message}`);
  process.exit(2);
}
