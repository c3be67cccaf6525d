/**
 * Resuming without a visit per done block. A block a resume would skip one by one (done marker,
 * then skip mask, in the pre-check order) is skipped the moment everything upstream of it has
 * succeeded; when everything upstream of it is itself skippable that happens before any block
 * runs, so the run can count it at once. The blocks that cannot be counted so are the blocks
 * that must run (not done, not masked: the scan's `kept`) and everything downstream of them,
 * within the task and through the same set of upstream tasks: a breadth-first closure from
 * those blocks, a few blocks per pending block. The task is then marked satisfied except that
 * set in the graph, the rest is counted as completed and skipped in bulk through
 * `BlockCompletion`, and the set runs (and skips) block by block as before, in the same
 * dependency order: a skippable block still waits for a block upstream of it that runs.
 *
 * A task is resumed block by block instead (as before) when its done markers do not decide
 * alone (provenance, `--force`, temporaries), when it has a block without a tracking cell, when
 * the blocks to run or their closure pass `limit`, or when an upstream task is resumed so.
 */

import type { BlockSet, DependencyGraph } from "../graph/mod.ts";
import { PositionSet } from "../schedule/mod.ts";
import type { DoneScan } from "../tracking/done_scan.ts";
import type { BlockCompletion } from "./completion.ts";

/** Blocks to run, and blocks in their closure, above which a task is resumed block by block. */
export const RESUME_SET_LIMIT = 1_000_000;

export interface ResumeTask {
  /** The store's scan, `kept` listing the blocks not done and not masked; null without one. */
  readonly scan: DoneScan | null;
  /** The done marker alone decides whether a block is done (no provenance, force, temporaries). */
  readonly markersDecide: boolean;
  /** Every block was done before the run (the scheduler's `alreadyDone`). */
  readonly alreadyDone: boolean;
  /** The done marker of a block (read for the few blocks of the closure only). */
  readonly isDone: (position: number) => boolean;
}

interface Bulk {
  readonly except: PositionSet;
  readonly done: number;
  readonly masked: number;
}

export class ResumePlan {
  readonly #bulk: readonly (Bulk | null)[];

  constructor(bulk: readonly (Bulk | null)[]) {
    this.#bulk = bulk;
  }

  /** A plan that skips nothing in bulk. */
  static none(): ResumePlan {
    return new ResumePlan([]);
  }

  /** The blocks of the task still to run or skip one by one, or null (all of them). */
  except(task: number): BlockSet | null {
    return this.#bulk[task]?.except ?? null;
  }

  /** Blocks of the task skipped in bulk, by reason. */
  skipped(task: number): { readonly done: number; readonly masked: number } {
    const b = this.#bulk[task] ?? null;
    return b === null ? { done: 0, masked: 0 } : { done: b.done, masked: b.masked };
  }

  /** Count the bulk skips (the scheduler must have been built with `except`). */
  apply(completion: BlockCompletion): void {
    this.#bulk.forEach((b, t) => {
      if (b === null) return;
      completion.skippedInBulk(t, b.done, "done");
      completion.skippedInBulk(t, b.masked, "masked");
    });
  }
}

export interface PlanResumeOptions {
  readonly limit?: number;
  /** Awaited now and then (yield to the event loop; throw to stop). */
  readonly pause?: () => Promise<void>;
}

/** Decide which tasks skip in bulk and which blocks of them remain (see the module comment). */
export async function planResume(
  graph: DependencyGraph,
  tasks: readonly ResumeTask[],
  options: PlanResumeOptions = {},
): Promise<ResumePlan> {
  const limit = options.limit ?? RESUME_SET_LIMIT;
  const bulk: (Bulk | null)[] = tasks.map(() => null);
  for (const t of graph.dag.order) {
    const task = tasks[t]!;
    const scan = task.scan;
    const layout = graph.layouts[t]!;
    if (
      task.alreadyDone || !task.markersDecide || scan === null || scan.kept === null ||
      scan.done === 0 || scan.blocks !== layout.blockCount || scan.keptCount > limit
    ) continue;
    const upstream = graph.dag.upstream[t]!;
    if (!upstream.every((u) => tasks[u]!.alreadyDone || bulk[u] !== null)) continue;
    const except = new PositionSet();
    for (const p of scan.kept) except.add(p);
    for (const u of upstream) {
      const remaining = bulk[u]?.except;
      remaining?.forEach((e) =>
        graph.forEachDownstream(u, e, (dt, dp) => {
          if (dt === t) except.add(dp);
        })
      );
    }
    const out: number[] = [];
    let overflow = false;
    for (let i = 0; i < except.size; i++) {
      const n = layout.intraDownstream(except.at(i), out);
      for (let k = 0; k < n; k++) except.add(out[k]!);
      if (except.size > limit) {
        overflow = true;
        break;
      }
      if ((i & 0xffff) === 0xffff) await options.pause?.();
    }
    if (overflow) continue;
    let exceptDone = 0;
    let exceptMasked = 0;
    for (let i = scan.keptCount; i < except.size; i++) {
      if (task.isDone(except.at(i))) exceptDone++;
      else exceptMasked++;
    }
    except.sort();
    bulk[t] = {
      except,
      done: scan.done - exceptDone,
      masked: scan.blocks - scan.done - scan.keptCount - exceptMasked,
    };
    await options.pause?.();
  }
  return new ResumePlan(bulk);
}
