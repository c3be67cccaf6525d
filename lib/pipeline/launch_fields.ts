/**
 * The task field `launch`: where a task's workers run. `"local"` (the default) keeps them in Web
 * Workers on this machine; `"slurm"` makes each worker a SLURM job (or a job step inside an
 * allocation); `{ kind: "command", argv }` wraps the worker command in a site's own launcher;
 * `"manual"` launches nothing: workers join by hand (`blockwise worker --secret-file`).
 */

import { describeValue } from "./describe_value.ts";
import type { TaskFields } from "./task_fields.ts";
import type {
  CommandLaunchSettings,
  LaunchConfig,
  SlurmLaunchConfig,
  WorkerRange,
} from "./spec.ts";

/**
 * The placeholders of a `{ kind: "command", argv }` launch template, which
 * lib/remote/launch_template.ts expands (defined here, below it, so validation needs no
 * import from lib/remote).
 */
export const COMMAND_LAUNCH_PLACEHOLDERS: readonly string[] = [
  "worker",
  "worker_shell",
  "task_id",
  "worker_id",
  "log",
];

export const LOCAL_LAUNCH: LaunchConfig = { kind: "local" };
/** No worker launched: workers join by hand (`blockwise worker --secret-file`). */
export const MANUAL_LAUNCH: LaunchConfig = { kind: "manual" };
export const DEFAULT_START_TIMEOUT = 3600;

const SLURM_KEYS = [
  "kind",
  "partition",
  "account",
  "time",
  "cpusPerWorker",
  "memPerWorker",
  "gres",
  "gpus",
  "extraArgs",
  "mode",
  "walltimeMargin",
  "arrayThrottle",
  "workers",
];
const COMMAND_KEYS = ["kind", "argv", "startTimeout", "walltimeMargin", "workers"];
const EXAMPLE =
  `launch: "slurm", or launch: { kind: "slurm", partition: "gpu", time: "2:00:00", gres: "gpu:1" }, or launch: { kind: "command", argv: ["bsub", "-I", "{worker}"] }`;

/** Defaults of a launch kind (for `--launcher KIND` on a task that names another kind). */
export function defaultLaunch(kind: "local" | "slurm" | "manual"): LaunchConfig {
  if (kind === "manual") return MANUAL_LAUNCH;
  return kind === "local" ? LOCAL_LAUNCH : {
    kind: "slurm",
    partition: null,
    account: null,
    time: null,
    cpusPerWorker: null,
    memPerWorker: null,
    gres: null,
    extraArgs: [],
    mode: "auto",
    walltimeMargin: null,
    arrayThrottle: null,
  };
}

export function readLaunch(t: TaskFields): LaunchConfig {
  const value = t.value("launch");
  if (value === undefined || value === "local") return LOCAL_LAUNCH;
  if (value === "slurm") return defaultLaunch("slurm");
  if (value === "manual") return MANUAL_LAUNCH;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    t.fail(
      "launch",
      `must be "local", "slurm", "manual" or an object; got ${
        describeValue(value)
      }. Write ${EXAMPLE}.`,
    );
  }
  const fields = value as Record<string, unknown>;
  const kind = fields["kind"];
  const allowed = kind === "slurm" ? SLURM_KEYS : kind === "command" ? COMMAND_KEYS : ["kind"];
  if (kind !== "local" && kind !== "slurm" && kind !== "command" && kind !== "manual") {
    t.fail(
      "launch",
      `has kind ${
        describeValue(kind)
      }; use "local", "slurm", "command" or "manual". Write ${EXAMPLE}.`,
    );
  }
  if (kind === "manual" && fields["workers"] !== undefined) {
    t.fail(
      "launch",
      `of kind "manual" takes no "workers" (got ${
        describeValue(fields["workers"])
      }): its workers join by hand, none is launched; remove "workers" and set maxWorkers to cap how many may join.`,
    );
  }
  const extra = Object.keys(fields).find((k) => !allowed.includes(k));
  if (extra !== undefined) {
    t.fail(
      "launch",
      `of kind "${kind}" has no option "${extra}"; its options: ${
        allowed.slice(1).join(", ") || "none"
      }.`,
    );
  }
  if (kind === "local") return LOCAL_LAUNCH;
  if (kind === "manual") return MANUAL_LAUNCH;
  const text = (key: string): string | null => {
    const v = fields[key];
    if (v === undefined) return null;
    if (typeof v !== "string" || v.trim() === "" || /\s/.test(v)) {
      t.fail(
        "launch",
        `option "${key}" must be a non-empty string without spaces; got ${describeValue(v)}.`,
      );
    }
    return v;
  };
  const seconds = (key: string, fallback: number | null): number | null => {
    const v = fields[key];
    if (v === undefined) return fallback;
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      t.fail(
        "launch",
        `option "${key}" must be a positive number of seconds; got ${describeValue(v)}.`,
      );
    }
    return v;
  };
  const strings = (key: string): string[] => {
    const v = fields[key];
    if (v === undefined) return [];
    if (!Array.isArray(v) || !v.every((a) => typeof a === "string")) {
      t.fail(
        "launch",
        `option "${key}" must be an array of strings (one argument each); got ${describeValue(v)}.`,
      );
    }
    return [...v as string[]];
  };
  if (kind === "command") {
    const argv = strings("argv");
    if (argv.length === 0) {
      t.fail(
        "launch",
        `of kind "command" needs "argv", the launch command with "{worker}" where the worker command goes, e.g. argv: ["bsub", "-I", "{worker}"].`,
      );
    }
    if (!argv.some((a) => a === "{worker}" || a.includes("{worker_shell}"))) {
      t.fail(
        "launch",
        `option "argv" never says where the worker command goes; got ${
          describeValue(argv)
        }. Add "{worker}" as an element (or "{worker_shell}" inside one), e.g. ["bsub", "-I", "{worker}"]; placeholders: ${
          COMMAND_LAUNCH_PLACEHOLDERS.map((p) => `{${p}}`).join(" ")
        }.`,
      );
    }
    const settings: CommandLaunchSettings = {
      kind,
      argv,
      startTimeout: seconds("startTimeout", DEFAULT_START_TIMEOUT)!,
      walltimeMargin: seconds("walltimeMargin", null),
      ...workersOf(t, fields["workers"]),
    };
    return settings;
  }
  const cpus = fields["cpusPerWorker"];
  if (cpus !== undefined && (!Number.isSafeInteger(cpus) || (cpus as number) < 1)) {
    t.fail(
      "launch",
      `option "cpusPerWorker" must be a whole number of at least 1; got ${describeValue(cpus)}.`,
    );
  }
  const throttle = fields["arrayThrottle"];
  if (throttle !== undefined && (!Number.isSafeInteger(throttle) || (throttle as number) < 1)) {
    t.fail(
      "launch",
      `option "arrayThrottle" must be a whole number of at least 1 (at most that many workers of one job array run at once); got ${
        describeValue(throttle)
      }. Write e.g. arrayThrottle: 50, or leave it out for no limit.`,
    );
  }
  const mode = fields["mode"] ?? "auto";
  if (mode !== "auto" && mode !== "sbatch" && mode !== "srun") {
    t.fail(
      "launch",
      `option "mode" must be "auto", "sbatch" or "srun"; got ${describeValue(mode)}.`,
    );
  }
  const gpus = fields["gpus"];
  if (gpus !== undefined && gpus !== "gres" && gpus !== "gpus-per-task") {
    t.fail(
      "launch",
      `option "gpus" must be "gres" (each worker asks --gres=gpu:N, the default) or "gpus-per-task" (--gpus-per-task=N); got ${
        describeValue(gpus)
      }.`,
    );
  }
  const slurm: SlurmLaunchConfig = {
    kind,
    partition: text("partition"),
    account: text("account"),
    time: text("time"),
    cpusPerWorker: (cpus as number | undefined) ?? null,
    memPerWorker: text("memPerWorker"),
    gres: text("gres"),
    ...(gpus === undefined ? {} : { gpus }),
    extraArgs: strings("extraArgs"),
    mode,
    walltimeMargin: seconds("walltimeMargin", null),
    arrayThrottle: (throttle as number | undefined) ?? null,
    ...workersOf(t, fields["workers"]),
  };
  return slurm;
}

const WORKERS_EXAMPLE = "Write e.g. workers: { min: 1, max: 20 }";

/** `launch.workers: { min, max }`: 0 <= min <= max, max >= 1 (whole numbers). */
function workersOf(t: TaskFields, value: unknown): { workers?: WorkerRange } {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    t.fail(
      "launch",
      `option "workers" must be an object { min, max }; got ${
        describeValue(value)
      }. ${WORKERS_EXAMPLE}.`,
    );
  }
  const fields = value as Record<string, unknown>;
  const extra = Object.keys(fields).find((k) => k !== "min" && k !== "max");
  if (extra !== undefined) {
    t.fail(
      "launch",
      `option "workers" has no field "${extra}"; it takes min and max. ${WORKERS_EXAMPLE}.`,
    );
  }
  const { min, max } = fields;
  if (!Number.isSafeInteger(max) || (max as number) < 1) {
    t.fail(
      "launch",
      `option "workers" needs "max", a whole number of at least 1 (the most workers queued and running at once); got ${
        describeValue(max)
      }. ${WORKERS_EXAMPLE}.`,
    );
  }
  if (!Number.isSafeInteger(min) || (min as number) < 0) {
    t.fail(
      "launch",
      `option "workers" needs "min", a whole number of at least 0 (the workers kept while no block waits); got ${
        describeValue(min)
      }. ${WORKERS_EXAMPLE}.`,
    );
  }
  if ((min as number) > (max as number)) {
    t.fail(
      "launch",
      `option "workers" has min ${min} above max ${max}; lower min or raise max.`,
    );
  }
  return { workers: { min: min as number, max: max as number } };
}

/**
 * `maxWorkers`, or the `max` of `launch.workers` (elastic): giving both with different maxima is
 * refused, since either would silently override the other.
 */
export function maxWorkersOf(t: TaskFields, launch: LaunchConfig): number {
  const fixed = t.integer("maxWorkers", 1, 1, "Set how many workers run at once");
  const range = "workers" in launch ? launch.workers : undefined;
  if (range === undefined) return fixed;
  if (t.value("maxWorkers") !== undefined && fixed !== range.max) {
    t.fail(
      "maxWorkers",
      `is ${fixed} but launch.workers.max is ${range.max}; give one of them (launch.workers: { min, max } is the elastic form of maxWorkers), or make them equal.`,
    );
  }
  return range.max;
}
