/**
 * `blockwise reset PATH [--failed] [--roi OFFSET:SHAPE] [--yes]`: forget what tracking stores
 * recorded about some blocks, so the next run processes them again.
 *
 * PATH is one task's store or a tracking directory (every store in it). What is cleared:
 * - default ("all"): every block's done mark, failures count and resource figures (wall/CPU
 *   time and sent/returned times back to NaN, worker id back to 2**32-1, byte counters to 0);
 * - `--roi OFFSET:SHAPE` ("roi"): the same, for the blocks whose write ROI intersects that box
 *   in world coordinates (e.g. `0,0,0:128,128,128`; as many numbers as the task has axes);
 * - `--failed` ("failed"): only the failures counts of blocks that failed and are not done
 *   (so they show as pending); with `--roi`, only failed blocks inside the box.
 *
 * Every store is locked first (a store held by a run is refused with exit 3, nothing changed),
 * then what would be cleared is counted. Destroying done marks needs consent: on a terminal
 * each store asks `Reset N done blocks in <path>? [y/N]`; without a terminal, `--yes` is
 * required, else nothing is changed and the command exits 2. The arrays are written through
 * `openMapped` and flushed; a `kind: "reset"` record is appended to each store's runs.jsonl:
 * `{ kind: "reset", at, mode: "all" | "failed" | "roi", roi: {offset, shape} | null,
 *    blocks_selected, blocks_reset, done_cleared, failures_cleared, host, pid,
 *    blockwise_version }`
 * where `blocks_selected` counts the blocks in the selection (all, or inside the ROI),
 * `blocks_reset` those that had a done mark or failures cleared, `done_cleared` the done marks
 * and `failures_cleared` the blocks whose failures count was cleared.
 */

import * as os from "node:os";
import process from "node:process";
import * as readline from "node:readline";
import { InputError, messageOf, StoreError } from "../errors.ts";
import type { Roi } from "../geometry/mod.ts";
import { type MappedFile, openMapped } from "../runtime/mod.ts";
import { fillPattern, itemSize, type TrackingArraySpec } from "../tracking/arrays.ts";
import { forEachBlockRun, type GridBox } from "../tracking/block_runs.ts";
import { findStores } from "../tracking/find_stores.ts";
import { restoreMissingChunks } from "../tracking/missing_chunks.ts";
import { chunkPath, readStoreMetadata, type StoreMetadata } from "../tracking/store_metadata.ts";
import { acquireStoreLock, type StoreLock } from "../tracking/lock.ts";
import { appendRunRecord } from "../tracking/runs_log.ts";
import { VERSION } from "../version.ts";
import { formatCount } from "../report/table.ts";
import { dropResetBlocks } from "../outputs/reset_records.ts";

export interface ResetOptions {
  readonly failed?: boolean;
  readonly roi?: string;
  readonly yes?: boolean;
}

export type ResetMode = "all" | "failed" | "roi";

const ROI_FORM = "OFFSET:SHAPE with comma-separated integers, e.g. 0,0,0:128,128,128";

/** Parse `--roi OFFSET:SHAPE`; InputError naming the value and the expected form. */
export function parseRoiArgument(value: string): Roi {
  const bad = (why: string) =>
    new InputError(`Invalid --roi "${value}": ${why}; expected ${ROI_FORM}`);
  const halves = value.split(":");
  if (halves.length !== 2) throw bad("it must have exactly one ':' between offset and shape");
  const numbers = (text: string, label: string): number[] =>
    text.split(",").map((part) => {
      const t = part.trim();
      const n = Number(t);
      if (t === "" || !/^[+-]?\d+$/.test(t) || !Number.isSafeInteger(n)) {
        throw bad(`the ${label} component "${part}" is not an integer`);
      }
      return n;
    });
  const offset = numbers(halves[0]!, "offset");
  const shape = numbers(halves[1]!, "shape");
  if (offset.length !== shape.length) {
    throw bad(`the offset has ${offset.length} numbers but the shape has ${shape.length}`);
  }
  const zero = shape.findIndex((s) => s <= 0);
  if (zero >= 0) throw bad(`the shape must be positive on every axis, got ${shape[zero]}`);
  return { offset, shape };
}

/** A ROI as `--roi` takes it: `OFFSET:SHAPE`, comma-separated. */
function roiText(roi: Roi): string {
  return `${roi.offset.join(",")}:${roi.shape.join(",")}`;
}

/** The blocks whose write ROI intersects `roi`: a box of block-grid coordinates. */
function roiBox(meta: StoreMetadata, roi: Roi): GridBox {
  const layout = meta.layout;
  const lo: number[] = [];
  const hi: number[] = [];
  for (let d = 0; d < layout.dims; d++) {
    const w = layout.writeRoi.shape[d]!;
    const base = layout.totalWriteRoi.offset[d]!;
    const totalEnd = base + layout.totalWriteRoi.shape[d]!;
    const begin = roi.offset[d]!;
    const end = begin + roi.shape[d]!;
    let first = -1;
    let last = -1;
    for (let g = 0; g < layout.gridShape[d]!; g++) {
      const b = base + g * w;
      const e = layout.fit === "shrink" ? Math.min(b + w, totalEnd) : b + w;
      if (b < end && e > begin) {
        if (first < 0) first = g;
        last = g;
      }
    }
    lo.push(first < 0 ? 0 : first);
    hi.push(first < 0 ? 0 : last + 1);
  }
  return { lo, hi };
}

interface Plan {
  readonly meta: StoreMetadata;
  readonly lock: StoreLock;
  readonly files: Map<string, MappedFile>;
  readonly box: GridBox | undefined;
  blocksSelected: number;
  blocksReset: number;
  doneCleared: number;
  failuresCleared: number;
}

function plural(n: number, word: string): string {
  return `${formatCount(n)} ${word}${n === 1 ? "" : "s"}`;
}

function closeFiles(plan: { files: Map<string, MappedFile> }): void {
  for (const f of plan.files.values()) {
    try {
      if (!f.closed) f.close();
    } catch {
      // Closing after a failure: the first error is what gets reported.
    }
  }
  plan.files.clear();
}

async function openArrays(meta: StoreMetadata, mode: ResetMode): Promise<Map<string, MappedFile>> {
  const files = new Map<string, MappedFile>();
  const wanted = meta.arrays.filter((s) =>
    mode === "failed" ? s.name === "done" || s.name === "failures" : true
  );
  try {
    for (const spec of wanted) {
      const file = chunkPath(meta, spec.name);
      files.set(
        spec.name,
        await openMapped(file, {
          byteLength: meta.layout.trackingCellCount * itemSize(spec.dtype),
          create: false,
          kind: "auto",
        }),
      );
    }
  } catch (error) {
    closeFiles({ files });
    throw new StoreError(
      `Cannot open the tracking store at ${meta.path} for writing: ${messageOf(error)}`,
      meta.path,
    );
  }
  return files;
}

function countPlan(plan: Plan, mode: ResetMode): void {
  const done = plan.files.get("done")!.view();
  const failures = plan.files.get("failures")!.typed(Uint32Array);
  plan.blocksSelected = forEachBlockRun(plan.meta.layout, (_p, start, length) => {
    for (let c = start; c < start + length; c++) {
      const isDone = done[c] === 1;
      const failed = failures[c]! > 0;
      if (mode === "failed") {
        if (!isDone && failed) {
          plan.failuresCleared++;
          plan.blocksReset++;
        }
        continue;
      }
      if (isDone) plan.doneCleared++;
      if (failed) plan.failuresCleared++;
      if (isDone || failed) plan.blocksReset++;
    }
  }, plan.box);
}

/** Set cells `start .. start+length-1` of an array to its fill value. */
function fillCells(file: MappedFile, spec: TrackingArraySpec, start: number, length: number): void {
  const end = start + length;
  const fill = spec.fillValue === "NaN" ? Number.NaN : spec.fillValue;
  switch (spec.dtype) {
    case "uint8":
      file.view().fill(fill, start, end);
      return;
    case "uint32":
      file.typed(Uint32Array).fill(fill, start, end);
      return;
    case "float32":
      file.typed(Float32Array).fill(fill, start, end);
      return;
    case "float64":
      file.typed(Float64Array).fill(fill, start, end);
      return;
    case "uint64": {
      const pattern = fillPattern(spec);
      const bytes = file.view();
      const size = pattern.length;
      for (let c = start; c < end; c++) bytes.set(pattern, c * size);
      return;
    }
  }
}

function applyPlan(plan: Plan, mode: ResetMode): void {
  const { files, meta } = plan;
  if (mode === "failed") {
    const done = files.get("done")!.view();
    const failures = files.get("failures")!.typed(Uint32Array);
    forEachBlockRun(meta.layout, (_p, start, length) => {
      for (let c = start; c < start + length; c++) {
        if (done[c] !== 1 && failures[c]! > 0) failures[c] = 0;
      }
    }, plan.box);
  } else {
    // The manifest first: reconciliation would adopt a reset block whose record says committed.
    const box = plan.box;
    dropResetBlocks(
      meta.path,
      meta.layout,
      (index) => box === undefined || index.every((g, d) => g >= box.lo[d]! && g < box.hi[d]!),
    );
    // done first: a reset interrupted half-way leaves blocks to redo, never a stale done mark.
    for (const spec of meta.arrays) {
      const file = files.get(spec.name);
      if (file === undefined) continue;
      forEachBlockRun(meta.layout, (_p, start, length) => {
        fillCells(file, spec, start, length);
      }, plan.box);
    }
  }
  for (const f of files.values()) f.flush();
}

function ask(question: string): Promise<boolean> {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
    let answered = false;
    rl.on("close", () => {
      if (!answered) resolve(false);
    });
    rl.question(question, (answer) => {
      answered = true;
      rl.close();
      resolve(/^\s*y(es)?\s*$/i.test(answer));
    });
  });
}

export async function resetCommand(target: string, options: ResetOptions): Promise<number> {
  const roi = options.roi === undefined ? null : parseRoiArgument(options.roi);
  const mode: ResetMode = options.failed ? "failed" : roi !== null ? "roi" : "all";
  const stores = findStores(target);
  const plans: Plan[] = [];
  const notice = (message: string) => process.stderr.write(`${message}\n`);
  try {
    // Lock and count every store before changing any.
    for (const dir of stores) {
      const lock = acquireStoreLock(dir, {
        command: `blockwise reset ${process.argv.slice(2).join(" ")}`.trim(),
        onNotice: notice,
      });
      let files = new Map<string, MappedFile>();
      try {
        const meta = readStoreMetadata(dir);
        if (roi !== null && roi.offset.length !== meta.layout.dims) {
          throw new InputError(
            `Invalid --roi "${options.roi}": it has ${roi.offset.length} axes but task "${meta.taskId}" (${meta.path}) has ${meta.layout.dims}; expected ${ROI_FORM}`,
          );
        }
        for (const restored of restoreMissingChunks(meta)) notice(restored);
        files = await openArrays(meta, mode);
        const plan: Plan = {
          meta,
          lock,
          files,
          box: roi === null ? undefined : roiBox(meta, roi),
          blocksSelected: 0,
          blocksReset: 0,
          doneCleared: 0,
          failuresCleared: 0,
        };
        plans.push(plan);
        countPlan(plan, mode);
      } catch (error) {
        if (!plans.some((p) => p.lock === lock)) {
          closeFiles({ files });
          lock.release();
        }
        throw error;
      }
    }
    if (roi !== null && plans.every((p) => p.blocksSelected === 0)) {
      throw new InputError(
        `--roi ${options.roi} intersects no block: ${
          plans.map((p) =>
            `the blocks of task "${p.meta.taskId}" cover ${roiText(p.meta.layout.totalWriteRoi)}`
          ).join("; ")
        }. Give a box that overlaps them (OFFSET:SHAPE in world units); nothing was changed.`,
      );
    }
    const interactive = process.stdin.isTTY === true;
    if (!options.yes && !interactive) {
      const destroying = plans.filter((p) => p.doneCleared > 0);
      if (destroying.length > 0) {
        throw new InputError(
          `Refusing to reset without confirmation: it would clear ${
            destroying.map((p) => `${formatCount(p.doneCleared)} done blocks in ${p.meta.path}`)
              .join(", ")
          }, and stdin is not a terminal to ask. Pass --yes to confirm; nothing was changed.`,
        );
      }
    }
    for (const plan of plans) {
      const path = plan.meta.path;
      if (plan.doneCleared > 0 && !options.yes) {
        const yes = await ask(
          `Reset ${formatCount(plan.doneCleared)} done blocks in ${path}? [y/N] `,
        );
        if (!yes) {
          process.stdout.write(`Skipped ${path}: nothing reset\n`);
          continue;
        }
      }
      applyPlan(plan, mode);
      closeFiles(plan);
      appendRunRecord(path, {
        kind: "reset",
        at: new Date().toISOString(),
        mode,
        roi: roi === null ? null : { offset: [...roi.offset], shape: [...roi.shape] },
        blocks_selected: plan.blocksSelected,
        blocks_reset: plan.blocksReset,
        done_cleared: plan.doneCleared,
        failures_cleared: plan.failuresCleared,
        host: os.hostname(),
        pid: process.pid,
        blockwise_version: VERSION,
      });
      const what = mode === "failed"
        ? `${plural(plan.failuresCleared, "failed block")} reset to pending (failures cleared)`
        : `${plural(plan.blocksReset, "block")} reset (${
          plural(plan.doneCleared, "done mark")
        } and ${plural(plan.failuresCleared, "failure count")} cleared${
          plan.meta.resourceTracking ? ", resource figures cleared" : ""
        })`;
      const scope = roi === null
        ? ""
        : ` in ROI ${options.roi} (${plural(plan.blocksSelected, "block")} ${
          plan.blocksSelected === 1 ? "intersects" : "intersect"
        } it)`;
      process.stdout.write(`Reset task "${plan.meta.taskId}" at ${path}: ${what}${scope}\n`);
    }
    return 0;
  } finally {
    for (const plan of plans) {
      closeFiles(plan);
      plan.lock.release();
    }
  }
}
