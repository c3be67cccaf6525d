/**
 * Job arrays: the sbatch launches of one task that arrive together (the same event-loop turn,
 * or within `delayMs`) become one `sbatch --array` submission instead of one job each, as
 * cluster admins ask. The launches coalesced share everything but their slot: the same task,
 * argv, log folder and environment. A batch of one stays a plain job (an array of one would be
 * the same job under a longer id); a batch above MAX_ARRAY_ELEMENTS is split into several
 * arrays. What comes later (a replacement for a lost worker, a task that starts later) forms a
 * new, smaller batch.
 */

import type { WorkerLaunchSpec } from "./launcher.ts";

/** One launch's part of a submission: its job (`1234`, or the array element `1234_5`). */
export interface Submitted {
  readonly jobId: string;
  /** The array's own id (`1234`) for an array element, null for a plain job. */
  readonly arrayId: string | null;
  /** sbatch's `--output` pattern, for the path of its log (`logPathOf`). */
  readonly logPattern: string;
}

/** Submits one batch; resolves with each launch's part, in order (or why it was not submitted). */
export type SubmitBatch = (
  specs: readonly WorkerLaunchSpec[],
) => Promise<readonly (Submitted | Error)[]>;

interface Batch {
  readonly specs: WorkerLaunchSpec[];
  readonly settle: ((result: Submitted | Error) => void)[];
}

/**
 * The launches waiting for their batch's submission. `slotVariable` is the one variable that
 * differs between the launches of a batch (each element's own slot); any other difference
 * makes another batch.
 */
export class LaunchBatcher {
  readonly #slotVariable: string;
  readonly #delayMs: number;
  readonly #submit: SubmitBatch;
  readonly #batches = new Map<string, Batch>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  /** Launches without a slot are never coalesced: each is a batch of its own. */
  #unique = 0;

  constructor(slotVariable: string, delayMs: number, submit: SubmitBatch) {
    this.#slotVariable = slotVariable;
    this.#delayMs = delayMs;
    this.#submit = submit;
  }

  /** Adds a launch to its batch; resolves once the batch was submitted (or refused). */
  add(spec: WorkerLaunchSpec): Promise<Submitted | Error> {
    const key = this.#key(spec);
    let batch = this.#batches.get(key);
    if (batch === undefined) {
      batch = { specs: [], settle: [] };
      this.#batches.set(key, batch);
    }
    batch.specs.push(spec);
    const result = new Promise<Submitted | Error>((resolve) => batch.settle.push(resolve));
    this.#timer ??= setTimeout(() => this.flush(), this.#delayMs);
    return result;
  }

  /** Submits every batch waiting now. */
  flush(): void {
    this.#clearTimer();
    const batches = [...this.#batches.values()];
    this.#batches.clear();
    for (const batch of batches) {
      void this.#submit(batch.specs).then(
        (r) => batch.settle.forEach((settle, i) => settle(r[i]!)),
        (e: unknown) => batch.settle.forEach((settle) => settle(e as Error)),
      );
    }
  }

  /** Ends every launch not submitted yet with `reason` (the run is over). */
  drop(reason: string): void {
    this.#clearTimer();
    for (const batch of this.#batches.values()) {
      for (const settle of batch.settle) settle(new Error(reason));
    }
    this.#batches.clear();
  }

  #clearTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #key(spec: WorkerLaunchSpec): string {
    if (spec.env[this.#slotVariable] === undefined) return `unique ${this.#unique++}`;
    const env = Object.entries(spec.env).filter(([k]) => k !== this.#slotVariable).sort((a, b) =>
      a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0
    );
    return JSON.stringify([spec.taskId, spec.logDir, spec.argv, env]);
  }
}

/** `items` in consecutive runs of at most `size`. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
