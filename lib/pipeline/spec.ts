/**
 * What a pipeline file describes, before and after validation. `PipelineModule` and
 * `TaskDefinition` are the user-facing shapes (the same ones `blockwise types` prints);
 * `TaskConfig` is the validated, normalised form the rest of blockwise works with.
 */

import type { Fit, LayoutSpec } from "../blocks/mod.ts";
import type { Roi } from "../geometry/mod.ts";

export interface RoiDefinition {
  offset: readonly number[];
  shape: readonly number[];
}

/** The block handed to `process` and `check`. */
export interface Block {
  readonly taskId: string;
  /** daisy's block ID (a `bigint` only when the grid's IDs exceed 2^53). */
  readonly id: number | bigint;
  /** The grid index the ID is computed from (anchored at `totalRoi`). */
  readonly index: readonly number[];
  readonly readRoi: RoiDefinition;
  readonly writeRoi: RoiDefinition;
  /** 1 for the first attempt, 2 for the first retry, ... */
  readonly attempt: number;
}

/** A mask file path, a flat/typed/nested array (one cell per block, nonzero skips), or data + shape. */
export type SkipMaskSource =
  | string
  | ArrayLike<number>
  | ArrayLike<boolean>
  | readonly (readonly unknown[])[]
  | { data: ArrayLike<number> | ArrayLike<boolean>; shape: readonly number[] };

/** Plain data: what `params` may hold. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/**
 * A task's output: a file or folder per block (`path`, with the placeholders of `command` but
 * not `{attempt}`), or a Zarr v2/v3 array written chunk by chunk (`zarr`, the array's folder;
 * `offset`: the array index of coordinate 0 on each axis, default 0).
 */
export type OutputDefinition =
  | { path: string }
  | { zarr: string; offset?: readonly number[] };

/**
 * External data a block reads, fingerprinted into its provenance: a file (`path`) or the chunks
 * of a Zarr array under the block's read ROI (`zarr`); by size and modification time, or by
 * content (`compare: "content"`).
 */
export type InputDefinition =
  | { path: string; compare?: "mtime" | "content" }
  | { zarr: string; compare?: "mtime" | "content"; offset?: readonly number[] };

/**
 * Where a task's workers run: `"local"` (Web Workers on this machine, the default), `"slurm"`
 * (each worker a SLURM job, or a job step inside an allocation) or `"command"` (a site's own
 * launch command around the worker command, for LSF, PBS, ...).
 */
export type LaunchDefinition =
  | "local"
  | "slurm"
  | "manual"
  | { kind: "local" }
  /** No worker is launched: workers join by hand (`blockwise worker --secret-file`). */
  | { kind: "manual" }
  | {
    kind: "slurm";
    partition?: string;
    account?: string;
    /** Walltime per worker job, as sbatch --time takes it ("1:00:00", "30"). */
    time?: string;
    cpusPerWorker?: number;
    /** As sbatch --mem takes it ("4G"). */
    memPerWorker?: string;
    gres?: string;
    /** How a task's `requires.gpu` is asked for: `--gres=gpu:N` (default) or `--gpus-per-task=N`. */
    gpus?: "gres" | "gpus-per-task";
    extraArgs?: readonly string[];
    /** "auto" (default): job steps inside an allocation, jobs outside one. */
    mode?: "auto" | "sbatch" | "srun";
    walltimeMargin?: number;
    /** sbatch mode: at most this many workers of one job array run at once (`--array=...%N`). */
    arrayThrottle?: number;
    /** Elastic worker count: from `min` up to `max` as the backlog asks (instead of maxWorkers). */
    workers?: { min: number; max: number };
  }
  | {
    kind: "command";
    /** The launch command; `{worker}` (an element of its own) becomes the worker's argv. */
    argv: readonly string[];
    /** Seconds a submitted worker may take to connect (default 3600). */
    startTimeout?: number;
    walltimeMargin?: number;
    /** Elastic worker count: from `min` up to `max` as the backlog asks (instead of maxWorkers). */
    workers?: { min: number; max: number };
  };

/**
 * A task whose blocks run a Python function in persistent Python workers: `module` is a .py file
 * (relative to the pipeline file), imported once per worker; `setup()` (optional) runs once per
 * worker and `process(block, state)` once per block.
 */
export interface PythonDefinition {
  module: string;
  /** The function called per block; default "process". */
  process?: string;
  /** A function called once per worker, whose result `process` gets; default none. */
  setup?: string;
  /** The Python 3.8+ program to run the workers with; default "python3". */
  interpreter?: string;
}

/** What `process` gets as its third argument. */
export interface BlockContext {
  /** Where to write each declared output for this block: a staging location, committed after. */
  readonly outputs: Readonly<Record<string, string>>;
  /** The task's `params`, or `{}`. */
  readonly params: Readonly<Record<string, JsonValue>>;
}

export interface TaskDefinition {
  id: string;
  totalRoi: RoiDefinition;
  readRoi: RoiDefinition;
  writeRoi: RoiDefinition;
  fit?: Fit;
  readWriteConflict?: boolean;
  maxWorkers?: number;
  maxRetries?: number;
  maxWorkerRestarts?: number;
  timeout?: number;
  requires?: Record<string, number>;
  upstream?: readonly string[];
  process?: (block: Block, state: unknown, context: BlockContext) => unknown;
  setup?: () => unknown;
  command?: readonly string[];
  python?: PythonDefinition;
  cwd?: string;
  check?: (block: Block) => boolean | Promise<boolean>;
  tracking?: string | false;
  resourceTracking?: boolean;
  skipMask?: SkipMaskSource;
  outputs?: Record<string, OutputDefinition>;
  version?: string;
  params?: Record<string, JsonValue>;
  inputs?: readonly InputDefinition[];
  quarantineAfter?: number;
  temporary?: boolean;
  launch?: LaunchDefinition;
  /**
   * Variables for the task's worker processes (Python workers, command blocks, remote workers),
   * over blockwise's own environment and the worker profile.
   */
  env?: Record<string, string>;
  /**
   * The worker profile (allocator kept warm between blocks, BLAS/OpenMP threads sized to each
   * worker's share of the cores) for Python workers and command blocks; default true.
   */
  workerProfile?: boolean;
}

export interface PipelineModule {
  tasks: readonly TaskDefinition[];
}

/** A validated output; `target` is absolute (a path template, or the array's folder). */
export interface OutputConfig {
  readonly name: string;
  readonly kind: "path" | "zarr";
  readonly target: string;
  /** As written in the pipeline (for messages). */
  readonly written: string;
  readonly offset: readonly number[] | null;
}

/** A validated input; `target` is absolute. */
export interface InputConfig {
  readonly kind: "path" | "zarr";
  readonly target: string;
  readonly written: string;
  readonly compare: "mtime" | "content";
  readonly offset: readonly number[] | null;
}

export interface SlurmLaunchConfig {
  readonly kind: "slurm";
  readonly partition: string | null;
  readonly account: string | null;
  readonly time: string | null;
  readonly cpusPerWorker: number | null;
  readonly memPerWorker: string | null;
  readonly gres: string | null;
  /** How each worker asks for its task's `requires.gpu` (absent: "gres"). */
  readonly gpus?: "gres" | "gpus-per-task";
  /** GPUs per worker (the task's `requires.gpu`), set where the launcher is made; absent: 0. */
  readonly gpusPerWorker?: number;
  readonly extraArgs: readonly string[];
  readonly mode: "auto" | "sbatch" | "srun";
  /** Seconds before its job's end a worker stops taking blocks, or null (automatic). */
  readonly walltimeMargin: number | null;
  /** sbatch mode: at most this many elements of one job array run at once, or null (no limit). */
  readonly arrayThrottle: number | null;
  /** Elastic worker count (`launch.workers`), absent for a fixed count (`maxWorkers`). */
  readonly workers?: WorkerRange;
}

/** `launch.workers`: between `min` and `max` workers, as many as the backlog keeps busy. */
export interface WorkerRange {
  readonly min: number;
  readonly max: number;
}

export interface CommandLaunchSettings {
  readonly kind: "command";
  readonly argv: readonly string[];
  readonly startTimeout: number;
  readonly walltimeMargin: number | null;
  /** Elastic worker count (`launch.workers`), absent for a fixed count (`maxWorkers`). */
  readonly workers?: WorkerRange;
}

/** A validated `launch`. */
export type LaunchConfig =
  | { readonly kind: "local" }
  | { readonly kind: "manual" }
  | SlurmLaunchConfig
  | CommandLaunchSettings;

export type LaunchKind = LaunchConfig["kind"];

/** What every validated task has, whatever runs its blocks; every default filled in. */
interface TaskConfigBase {
  readonly index: number;
  readonly id: string;
  readonly layout: LayoutSpec;
  readonly maxWorkers: number;
  readonly maxRetries: number;
  readonly maxWorkerRestarts: number;
  /** Seconds per block, or null for no limit. */
  readonly timeout: number | null;
  readonly requires: Readonly<Record<string, number>>;
  readonly upstream: readonly string[];
  readonly check: ((block: Block) => boolean | Promise<boolean>) | null;
  /** A store path, `false` to disable, or null to follow the run's tracking directory. */
  readonly tracking: string | false | null;
  readonly resourceTracking: boolean | null;
  readonly skipMask: SkipMaskSource | null;
  readonly outputs: readonly OutputConfig[];
  readonly version: string | null;
  readonly params: Readonly<Record<string, JsonValue>> | null;
  readonly inputs: readonly InputConfig[];
  /** Failed attempts over all runs after which a block is left alone, or null (never). */
  readonly quarantineAfter: number | null;
  readonly temporary: boolean;
  /** Where its workers run. */
  readonly launch: LaunchConfig;
  /** Variables for its worker processes, or null. */
  readonly env: Readonly<Record<string, string>> | null;
  /** Whether its Python workers and command blocks get the worker profile. */
  readonly workerProfile: boolean;
}

/** A task whose blocks run a `process` function in Web Workers. */
export interface ProcessTaskConfig extends TaskConfigBase {
  readonly kind: "process";
  readonly process: (block: Block, state: unknown, context: BlockContext) => unknown;
  readonly setup: (() => unknown) | null;
}

/** A task whose blocks each run a program (argv template, placeholders filled per block). */
export interface CommandTaskConfig extends TaskConfigBase {
  readonly kind: "command";
  readonly command: readonly string[];
  /**
   * Absolute folder the command runs in (`cwd` resolved against the pipeline file's folder),
   * or null for the folder blockwise was started in.
   */
  readonly cwd: string | null;
}

/** A validated `python` field. */
export interface PythonSettings {
  /** Absolute path of the module. */
  readonly module: string;
  /** As written in the pipeline (for messages). */
  readonly written: string;
  readonly process: string;
  readonly setup: string | null;
  readonly interpreter: string;
  /**
   * A task of the daisy API (`blockwise daisy-session`), whose `process_function` takes a block
   * (`block`) or drives `daisy.Client` itself (`worker`). Run here, its workers are threads of the
   * Python process that started the run, which the session's launcher asks for each one; launched
   * elsewhere (SLURM, a launch command), each worker is `python -m blockwise.daisy._job`, which
   * imports `module` and calls its function `process`.
   */
  readonly embedded?: { readonly mode: "block" | "worker" };
}

/** A task whose blocks run a Python function in persistent Python worker processes. */
export interface PythonTaskConfig extends TaskConfigBase {
  readonly kind: "python";
  readonly python: PythonSettings;
}

/** A validated task; `kind` says what runs its blocks. */
export type TaskConfig = ProcessTaskConfig | CommandTaskConfig | PythonTaskConfig;

export interface PipelineConfig {
  /** Absolute path of the pipeline module (workers import it again). */
  readonly path: string;
  readonly tasks: readonly TaskConfig[];
}

export type { Fit, Roi };
