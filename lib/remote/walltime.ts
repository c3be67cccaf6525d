/**
 * When a worker's batch job ends, so that it stops taking blocks in time (a job killed at its
 * walltime mid-block would waste the block and look like a crash). SLURM says it through
 * `SLURM_JOB_END_TIME` (newer releases) or `squeue -o %e`; other launchers (and tests) can set
 * `BLOCKWISE_JOB_END_TIME` (seconds since the epoch).
 */

import { spawnSync } from "node:child_process";

export const JOB_END_ENV = "BLOCKWISE_JOB_END_TIME";

/** Runs a program and returns its stdout, or null when it cannot run or fails. */
export type ProgramRunner = (program: string, args: readonly string[]) => string | null;

const runProgram: ProgramRunner = (program, args) => {
  const r = spawnSync(program, [...args], { encoding: "utf8", timeout: 15_000 });
  return r.status === 0 && typeof r.stdout === "string" ? r.stdout : null;
};

/** The job's end (ms since the epoch), or null when it has none or nobody says. */
export function jobEndTime(
  env: Readonly<Record<string, string | undefined>>,
  run: ProgramRunner = runProgram,
): number | null {
  for (const key of [JOB_END_ENV, "SLURM_JOB_END_TIME"]) {
    const v = env[key];
    if (v !== undefined && /^\d+(\.\d+)?$/.test(v.trim())) return Number(v) * 1000;
  }
  const job = env["SLURM_JOB_ID"];
  if (job === undefined || !/^\d+$/.test(job)) return null;
  // An array element asks for itself: the element that kept the array's id would get a line for
  // every element of the array.
  const array = env["SLURM_ARRAY_JOB_ID"];
  const element = env["SLURM_ARRAY_TASK_ID"];
  const id = array !== undefined && element !== undefined && /^\d+$/.test(array) &&
      /^\d+$/.test(element)
    ? `${array}_${element}`
    : job;
  const out = run("squeue", ["-h", "-j", id, "-o", "%e"]);
  return out === null ? null : parseSlurmTime(out.trim());
}

/** squeue's `%e`: local time `YYYY-MM-DDTHH:MM:SS`, or a word for "none". */
export function parseSlurmTime(text: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})$/.exec(text);
  if (m === null) return null;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const t = new Date(y, mo - 1, d, h, mi, s).getTime();
  return Number.isFinite(t) ? t : null;
}

/** `BLOCKWISE_WALLTIME_MARGIN` (seconds), or null for the automatic margin. */
export function walltimeMargin(
  env: Readonly<Record<string, string | undefined>>,
): number | null {
  const v = env["BLOCKWISE_WALLTIME_MARGIN"];
  if (v === undefined || v === "") return null;
  const n = Number(v);
  return Number.isFinite(n) && n > 0 ? n : null;
}
