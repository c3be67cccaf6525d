/**
 * Types for blockwise pipeline files (printed by `blockwise types`).
 *
 * Save this file next to your pipeline as blockwise.d.ts and import the types only; a pipeline
 * needs nothing from blockwise at run time:
 *
 *   import type { Block, Pipeline, Task } from "./blockwise.d.ts";
 *
 *   export default {
 *     tasks: [
 *       {
 *         id: "extract",
 *         totalRoi: { offset: [0, 0, 0], shape: [512, 512, 512] },
 *         readRoi: { offset: [-8, -8, -8], shape: [80, 80, 80] },
 *         writeRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
 *         process(block: Block) {
 *           // read block.readRoi, write block.writeRoi
 *         },
 *       },
 *     ],
 *   } satisfies Pipeline;
 */

/** A region of interest: the half-open box [offset, offset + shape), one entry per axis. */
export interface Roi {
  /** Where the box starts on each axis, in voxels (integers, may be negative). */
  offset: readonly number[];
  /** The size of the box on each axis, in voxels (integers >= 1). */
  shape: readonly number[];
}

/**
 * How blocks at the upper border of totalRoi are handled (as in daisy):
 * - "valid": only blocks whose read ROI lies entirely inside totalRoi (the default);
 * - "overhang": also border blocks whose read ROI sticks out of totalRoi;
 * - "shrink": border blocks are cropped to totalRoi (the block ID is that of the full block).
 */
export type Fit = "valid" | "overhang" | "shrink";

/** The block handed to process and check. */
export interface Block {
  /** The id of the task the block belongs to. */
  readonly taskId: string;
  /** daisy's block ID (a bigint only when the grid's IDs exceed 2^53). */
  readonly id: number | bigint;
  /** The grid index the ID is computed from, one entry per axis (anchored at totalRoi). */
  readonly index: readonly number[];
  /** The region this block may read: its write ROI plus the context around it. */
  readonly readRoi: Roi;
  /** The region this block writes. Write ROIs of a task's blocks never overlap. */
  readonly writeRoi: Roi;
  /** 1 for the first attempt, 2 for the first retry, and so on. */
  readonly attempt: number;
}

/**
 * Which blocks to skip in this run, one cell per block (nonzero skips), in C order over the
 * block grid anchored at the total write ROI: a mask file path (.npy, or a Zarr v2/v3 array),
 * the cells themselves (flat, typed, or nested arrays of numbers or booleans), or the cells with
 * their grid shape. "blockwise mask import" turns a voxel mask into one.
 */
export type SkipMask =
  | string
  | ArrayLike<number>
  | ArrayLike<boolean>
  | readonly (readonly unknown[])[]
  | { data: ArrayLike<number> | ArrayLike<boolean>; shape: readonly number[] };

/** Plain data, what params may hold. */
export type Json = null | boolean | number | string | readonly Json[] | {
  readonly [key: string]: Json;
};

/**
 * A declared output of a task:
 * - { path }: a file (or folder) per block; the path must contain {block_id}, {index} or
 *   {write_offset} and may use every placeholder of command except {attempt};
 * - { zarr }: a Zarr v2 or v3 array (its folder) that many blocks write, each the chunk files
 *   (or shards) its write ROI covers; write ROIs must be aligned to the array's chunks. offset
 *   is the array index of coordinate 0 on each axis (default 0).
 * Relative paths resolve against the pipeline file's folder.
 */
export type Output = { path: string } | { zarr: string; offset?: readonly number[] };

/**
 * External data blocks read, fingerprinted into each block's provenance: a file, or the chunks
 * of a Zarr array under the block's read ROI; by size and modification time (the default) or
 * by content.
 */
export type Input =
  | { path: string; compare?: "mtime" | "content" }
  | { zarr: string; compare?: "mtime" | "content"; offset?: readonly number[] };

/**
 * Where a task's workers run. "local" (default): Web Workers on this machine. "slurm": each
 * worker a SLURM job (sbatch; workers launched together form one job array), or a job step
 * (srun) when blockwise itself runs inside an allocation; workers connect back to this run
 * over TCP (see blockwise run --listen).
 * { kind: "command", argv }: a site's own launcher around the worker command; an argv element
 * "{worker}" becomes the worker command, "{worker_shell}" inside an element the same as one
 * shell-quoted string; also {task_id} {worker_id} {log}.
 * "manual": no worker is launched; workers join by hand (blockwise worker --connect HOST:PORT
 * --secret-file PATH, which the run prints), up to maxWorkers.
 */
export type Launch =
  | "local"
  | "slurm"
  | "manual"
  | { kind: "local" }
  | { kind: "manual" }
  | {
    kind: "slurm";
    partition?: string;
    account?: string;
    /** Walltime per worker job, as sbatch --time takes it, e.g. "2:00:00". */
    time?: string;
    cpusPerWorker?: number;
    /** Memory per worker job, as sbatch --mem takes it, e.g. "8G". */
    memPerWorker?: string;
    /** Generic resources per worker job, e.g. "gpu:1". */
    gres?: string;
    /** How each worker asks for the task's requires.gpu: "gres" (--gres=gpu:N, default) or "gpus-per-task". */
    gpus?: "gres" | "gpus-per-task";
    /** More sbatch/srun arguments, one per element. */
    extraArgs?: readonly string[];
    /** "auto" (default): srun steps inside an allocation, sbatch jobs outside one. */
    mode?: "auto" | "sbatch" | "srun";
    /**
     * Seconds before its job's walltime a worker stops taking blocks; default twice the task's
     * mean block time, at least 60.
     */
    walltimeMargin?: number;
    /**
     * sbatch mode: the workers launched together are one job array; at most this many of its
     * elements run at once (sbatch --array=0-N%arrayThrottle). Default: no limit.
     */
    arrayThrottle?: number;
    /**
     * Elastic worker count (instead of maxWorkers): min workers at first (fewer when fewer
     * blocks are ready), more up to max while the waiting blocks would keep them busy longer
     * than a worker takes to start (about ceil(waiting blocks * mean block seconds / start-up
     * seconds)), idle ones released down to min when no block waits. min >= 0, max >= 1.
     */
    workers?: { min: number; max: number };
  }
  | {
    kind: "command";
    argv: readonly string[];
    /** Seconds a submitted worker may take to connect; default 3600. */
    startTimeout?: number;
    walltimeMargin?: number;
    /**
     * Elastic worker count (instead of maxWorkers): min workers at first (fewer when fewer
     * blocks are ready), more up to max while the waiting blocks would keep them busy longer
     * than a worker takes to start (about ceil(waiting blocks * mean block seconds / start-up
     * seconds)), idle ones released down to min when no block waits. min >= 0, max >= 1.
     */
    workers?: { min: number; max: number };
  };

/**
 * A process function written in Python, run in persistent Python worker processes: each worker
 * imports module once, calls setup() once (when named) and process(block, state) for every
 * block. In Python, block has task_id, id, index, read_roi and write_roi (offset and shape
 * tuples, to_slices() for numpy indexing), attempt, outputs and params. Needs Python 3.8+.
 */
export interface Python {
  /** The .py file, relative to the pipeline file's folder (its folder goes first on sys.path). */
  module: string;
  /** The function called per block, process(block, state) or process(block); default "process". */
  process?: string;
  /** A function called once per worker; what it returns is process's state. Default: none. */
  setup?: string;
  /** The Python program to run workers with, a name on PATH or a path; default "python3". */
  interpreter?: string;
}

/** The third argument of process. */
export interface BlockContext {
  /**
   * For each declared output, where this block writes it: a staging path (a file path, or for
   * a Zarr output a folder holding a copy of the array's metadata, to open as the array). It is
   * hashed and moved into place after process returns.
   */
  readonly outputs: Readonly<Record<string, string>>;
  /** The task's params, or {}. */
  readonly params: Readonly<Record<string, Json>>;
}

/**
 * One task of a pipeline: a total ROI cut into blocks, and a process function (run in Web
 * Workers), a command (one program run per block) or a Python function (python). Context is what setup returns and
 * process receives; write Task<MyContext> to type it.
 */
export interface Task<Context = unknown> {
  /**
   * Unique name of the task: letters, digits, ".", "_" and "-", not starting with "__". It
   * names the task's tracking store directory.
   */
  id: string;
  /** The whole region the task reads. Blocks tile it by the write ROI's shape. */
  totalRoi: Roi;
  /**
   * Template read ROI of one block: only its shape and its offset relative to writeRoi matter.
   * It must contain writeRoi; the margin around writeRoi is the block's context.
   */
  readRoi: Roi;
  /** Template write ROI of one block. Its shape is the tiling stride. */
  writeRoi: Roi;
  /** Border handling; default "valid". */
  fit?: Fit;
  /**
   * Whether blocks whose read ROI overlaps a neighbour's write ROI must not run at the same
   * time (the neighbour runs first); default true, as in daisy.
   */
  readWriteConflict?: boolean;
  /**
   * Workers (Web Workers, Python processes or concurrent commands) at once; default 1. With
   * launch.workers (elastic), its max is the task's maxWorkers.
   */
  maxWorkers?: number;
  /** Retries of a failed block before it fails for good; default 2 (3 attempts in all). */
  maxRetries?: number;
  /**
   * Crashed or timed-out workers that may be replaced before the task is abandoned; default 10.
   */
  maxWorkerRestarts?: number;
  /** Time limit per block attempt, in seconds (a positive number); default none. */
  timeout?: number;
  /**
   * Resources one worker of this task holds, checked against the run's --resources budget,
   * e.g. { cpu: 1, gpu: 1 }; default {}. gpu: whole devices of its own per worker, named in
   * its process's CUDA_VISIBLE_DEVICES (docs/guide/gpus.md).
   */
  requires?: Record<string, number>;
  /**
   * Ids of the tasks this task reads from; default []. A block waits for every upstream block
   * whose write ROI overlaps its read ROI. Linked tasks must have the same number of axes.
   */
  upstream?: readonly string[];
  /**
   * Processes one block, in a Web Worker; may be async. Throwing fails this attempt (it is
   * retried up to maxRetries). context is what setup returned (undefined without setup);
   * outputs and params come in the third argument. Give exactly one of process, command and
   * python.
   */
  process?(block: Block, context: Context, block_context: BlockContext): unknown;
  /** Runs once per worker before its first block; its result is handed to process. */
  setup?(): Context | Promise<Context>;
  /**
   * A program to run per block instead of process: argv, the program first. These
   * placeholders are replaced in every argument (vectors are joined by commas, e.g. "0,64,128"):
   *   {task_id} {block_id} {index} {read_offset} {read_shape} {write_offset} {write_shape}
   *   {attempt}, and {output:NAME} for each declared output (where to write it)
   * The program also gets the environment variables BLOCKWISE_TASK_ID, BLOCKWISE_BLOCK_ID,
   * BLOCKWISE_INDEX, BLOCKWISE_READ_OFFSET, BLOCKWISE_READ_SHAPE, BLOCKWISE_WRITE_OFFSET,
   * BLOCKWISE_WRITE_SHAPE, BLOCKWISE_ATTEMPT and BLOCKWISE_OUTPUT_<NAME> for each output. A
   * nonzero exit status fails the attempt.
   * Example: ["python3", "export.py", "--offset", "{write_offset}", "--shape", "{write_shape}"].
   */
  command?: readonly string[];
  /**
   * A process function in Python instead of process, e.g.
   * python: { module: "segment.py", setup: "load_model" }. See Python.
   */
  python?: Python;
  /**
   * The folder a command runs in (command tasks only); relative paths resolve against the
   * pipeline file's folder, like tracking. Default: the folder blockwise was started in.
   * Process tasks cannot have one: Web Workers share the blockwise process's folder.
   */
  cwd?: string;
  /**
   * Runs in the scheduler before a block is handed out (after the done marker and the skip
   * mask); returning true marks the block done without running it.
   */
  check?(block: Block): boolean | Promise<boolean>;
  /**
   * Where to keep this task's tracking store (done markers, failures): a directory path, or
   * false to disable tracking for this task. Default: follow the run's --tracking-dir.
   */
  tracking?: string | false;
  /** Record per-block wall/CPU time, memory and I/O; default: follow --resource-tracking. */
  resourceTracking?: boolean;
  /** Blocks to skip in this run; default none. See SkipMask. */
  skipMask?: SkipMask;
  /**
   * Named outputs, committed atomically per block (staged, hashed, renamed into place, then
   * recorded in the store's manifest). Needs a tracking store. See Output.
   */
  outputs?: Record<string, Output>;
  /**
   * Bump it when a change of the code changes its results: every block made with another
   * version is stale and runs again. Fields like maxWorkers or timeout never make anything stale.
   */
  version?: string;
  /** Parameters that change results; a block made with other params is stale. Plain data. */
  params?: Record<string, Json>;
  /** External data the blocks read; a block whose inputs changed is stale. See Input. */
  inputs?: readonly Input[];
  /**
   * Failed attempts, over all runs, after which a block is left alone (quarantined) until
   * reset --failed or --force; default: failed blocks are retried every run.
   */
  quarantineAfter?: number;
  /**
   * Delete each block's outputs once every block reading them has committed (needs outputs);
   * a deleted temporary never makes anything stale, and is rebuilt only when a reader must run.
   */
  temporary?: boolean;
  /**
   * Where this task's workers run (process and python tasks): "local" Web Workers or Python
   * processes (default), SLURM jobs, a site's launch command, or workers joining by hand ("manual"). See Launch; blockwise run --launcher overrides the kind.
   */
  launch?: Launch;
  /**
   * Environment variables for the task's worker processes (Python workers, command blocks,
   * remote workers), over blockwise's own environment and the worker profile; not for tasks
   * whose blocks run in local Web Workers (they share blockwise's environment).
   */
  env?: Record<string, string>;
  /**
   * The worker profile for Python workers and command blocks (default true): glibc keeps freed
   * memory for the next block (MALLOC_TOP_PAD_), and OMP/OpenBLAS/MKL/numexpr threads are set to
   * each worker's share of the cores. What you set yourself wins; false turns it off.
   */
  workerProfile?: boolean;
}

/** What a pipeline file exports by default. */
export interface Pipeline {
  /** The tasks, in any order; dependencies come from each task's upstream list. */
  tasks: readonly Task[];
}

/*
 * The blockwise module: helpers for reading a block from a Zarr array and writing its result,
 * importable from a pipeline file with nothing installed (blockwise carries it, and zarrita):
 *
 *   import { openArray, readBlock, writeBlock } from "blockwise";
 *
 * For an editor, map "blockwise" to this file (tsconfig.json "paths", or deno.json "imports").
 * An array's offset is the array index of coordinate 0 on each axis (default 0), as in a
 * declared zarr output.
 */

/** A Zarr array opened by openArray (a zarrita Array: zarr.get and zarr.set take it). */
export interface ZarrArray {
  readonly shape: number[];
  readonly chunks: number[];
  /** e.g. "uint8", "float32". */
  readonly dtype: string;
  readonly attrs: Record<string, unknown>;
}

/** Numeric element arrays: what readRoi returns and writeBlock takes. */
export type NumericArray =
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array
  | Float32Array
  | Float64Array;

/** Elements with their shape and strides (C order from readRoi), as zarrita uses them. */
export interface NumericChunk {
  readonly data: NumericArray;
  readonly shape: readonly number[];
  readonly stride: readonly number[];
}

/** Where an array sits in the pipeline's coordinates. */
export interface Placement {
  /** The array index of coordinate 0 on each axis; default 0 on every axis. */
  readonly offset?: readonly number[];
}

/** Options of readRoi and readBlock. */
export interface ReadOptions extends Placement {
  /** The value of voxels outside the array; default: the array's fill value, else 0. */
  readonly fill?: number | bigint;
}

/** A zarrita slice (what zarr.slice returns). */
export interface Slice {
  start: number | null;
  stop: number | null;
  step: number | null;
}

/** Opens the Zarr array (v2 or v3; gzip, zlib, zstd, blosc, lz4) in the folder path. */
export declare function openArray(path: string): Promise<ZarrArray>;

/** The zarrita selection of roi in an array placed at options.offset: zarr.get(array, it). */
export declare function roiSelection(roi: Roi, options?: Placement): Slice[];

/** Reads roi; voxels outside the array get options.fill. C order, shape roi.shape. */
export declare function readRoi(
  array: ZarrArray,
  roi: Roi,
  options?: ReadOptions,
): Promise<NumericChunk>;

/** Reads the block's read ROI (write ROI plus context), padded at the volume's edge. */
export declare function readBlock(
  array: ZarrArray,
  block: Pick<Block, "readRoi" | "writeRoi">,
  options?: ReadOptions,
): Promise<NumericChunk>;

/**
 * Writes the block's write ROI: data is the write ROI's elements, or a result computed over the
 * whole read ROI (its write ROI part is written); C order, or a chunk with shape and strides.
 */
export declare function writeBlock(
  array: ZarrArray,
  block: Pick<Block, "readRoi" | "writeRoi">,
  data: NumericArray | NumericChunk,
  options?: Placement,
): Promise<void>;
