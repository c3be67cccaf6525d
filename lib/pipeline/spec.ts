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
  process?: (block: Block, context: unknown) => unknown;
  setup?: () => unknown;
  command?: readonly string[];
  cwd?: string;
  check?: (block: Block) => boolean | Promise<boolean>;
  tracking?: string | false;
  resourceTracking?: boolean;
  skipMask?: SkipMaskSource;
}

export interface PipelineModule {
  tasks: readonly TaskDefinition[];
}

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
}

/** A task whose blocks run a `process` function in Web Workers. */
export interface ProcessTaskConfig extends TaskConfigBase {
  readonly kind: "process";
  readonly process: (block: Block, context: unknown) => unknown;
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

/** A validated task; `kind` says what runs its blocks. */
export type TaskConfig = ProcessTaskConfig | CommandTaskConfig;

export interface PipelineConfig {
  /** Absolute path of the pipeline module (workers import it again). */
  readonly path: string;
  readonly tasks: readonly TaskConfig[];
}

export type { Fit, Roi };
