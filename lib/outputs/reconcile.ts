/**
 * The start of every run of a task with outputs (seed 003, steps 4-5): sweep staging leftovers,
 * then put every block in exactly one place, trusting the disk over the ledger:
 *
 * | manifest                      | on disk                    | done byte | what happens            |
 * |-------------------------------|----------------------------|-----------|-------------------------|
 * | committed                     | every file, sizes match    | set       | skip (recorded, present) |
 * | committed                     | a file missing or resized  | cleared   | drop record, rebuild     |
 * | committed, temporary task     | a file missing or resized  | set       | deleted (tombstone)      |
 * | tombstone                     | (anything)                 | set       | deleted; files removed   |
 * | intent only (crash mid-commit)| every file, hashes match   | set       | adopt (commit record)    |
 * | intent only                   | not all / other bytes      | cleared   | roll back, rebuild       |
 * | dropped, or nothing           | (anything)                 | cleared   | never built / rebuild    |
 *
 * plus files under the outputs that no record names (unexpected; counted, never deleted).
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type { TaskLayout } from "../blocks/mod.ts";
import type { TaskConfig } from "../pipeline/spec.ts";
import {
  OUTPUTS_DELETED,
  OUTPUTS_NONE,
  OUTPUTS_PRESENT,
  type TrackingStore,
} from "../tracking/store.ts";
import { A_FOLDER, lastModifiedMs, listFolder, pathSize } from "../runtime/file_scan.ts";
import { hexPrefixWords } from "./digest.ts";
import { sha256File } from "./inputs.ts";
import type { IntentRecord, ManifestRecord, ManifestWriter } from "./manifest.ts";
import { readManifest, RESET_WHY } from "./manifest.ts";
import { type OutputPlan, STAGING_FOLDER } from "./output_plan.ts";
import { liveOwner, OWNER_FILE } from "./output_owners.ts";
import { finalLocation } from "./staging.ts";
import { positionOfIndex } from "../tracking/grid_index.ts";
import type { ReconcileSummary } from "../run/run_types.ts";

export { positionOfIndex };

/** Positions whose outputs a reconcile found missing (plan's "output missing"). */
export interface ReconcileResult {
  readonly summary: ReconcileSummary;
  readonly missing: ReadonlySet<number>;
  /** Positions `blockwise reset` dropped (plan's "reset"). */
  readonly reset: ReadonlySet<number>;
}

/** What reconcile reads and sets of a store (a run's mapped store, or plan's snapshot). */
export type ReconcileStore = Pick<TrackingStore, "path" | "done" | "provenance">;

const UNEXPECTED_LIMIT = 200_000;

export function reconcileTask(
  task: TaskConfig,
  layout: TaskLayout,
  plans: readonly OutputPlan[],
  store: ReconcileStore,
  manifest: ManifestWriter | null,
): ReconcileResult {
  const stagingRemoved = manifest === null ? 0 : sweepStaging(plans, task.id);
  const contents = readManifest(store.path);
  const expected = new Set<string>();
  const missing = new Set<number>();
  const reset = new Set<number>();
  const rolledBackAt = new Set<number>();
  const appends: ManifestRecord[] = [];
  const recorded = new Uint8Array(layout.trackingCellCount);
  let present = 0;
  let adopted = 0;
  let notPresent = 0;
  let recordedChanged = 0;
  let rolledBack = 0;
  let tombstoned = 0;
  const buffer = new Uint8Array(1 << 20);
  for (const entry of contents.blocks.values()) {
    const intent = entry.intent;
    if (intent === null) continue;
    const position = positionOfIndex(layout, intent.index);
    if (position < 0) continue; // a block of a shrunk grid: not ours any more
    const cell = layout.trackingCellOf(position);
    const files = intent.files.map(([output, rel, size, sha]) => {
      const plan = plans.find((p) => p.name === output);
      return { file: plan === undefined ? null : finalLocation(plan, rel), size, sha };
    });
    if (entry.state === "dropped") {
      // Its rebuild replaces what is left of it (a reset block's files are all there): the
      // block's own files, not unexpected ones.
      for (const f of files) if (f.file !== null) expected.add(f.file);
      if (entry.why === RESET_WHY) reset.add(position);
      continue;
    }
    // A temporary block whose files are gone was deleted: its tombstone is written without
    // waiting for the disk (a crash may lose it after the files went), and one deleted by hand
    // is no different. Never a rebuild: regenerated only if a reader that runs needs it.
    //
    // A file written after its block was recorded (another run over the same outputs, an edit
    // by hand; an unreadable time checks nothing) is re-hashed below: other bytes rebuild it.
    const recordedBy = Date.parse(intent.at) + CLOCK_SLACK_MS;
    const newer: { file: string; sha: string }[] = [];
    const gone = entry.state === "committed"
      ? files.find((f) => {
        if (f.file === null) return true;
        const found = pathSize(f.file);
        if (found === A_FOLDER) return false;
        if (found !== f.size) return true;
        if (lastModifiedMs() > recordedBy) newer.push({ file: f.file, sha: f.sha });
        return false;
      })
      : undefined;
    if (entry.state === "tombstoned" || (gone !== undefined && task.temporary)) {
      // A deleted temporary: done, its hash kept; files a kill left behind go now.
      tombstoned++;
      if (entry.state !== "tombstoned") {
        appends.push({ t: "tombstone", index: intent.index, content: intent.content });
      }
      if (manifest !== null) {
        for (const f of files) {
          if (f.file !== null) fs.rmSync(f.file, { recursive: true, force: true });
        }
      }
      if (cell >= 0) {
        store.done[cell] = 1;
        recorded[cell] = 1;
        setContent(store, cell, intent);
        if (store.provenance !== null) store.provenance.outputs[cell] = OUTPUTS_DELETED;
      }
      continue;
    }
    if (entry.state === "committed") {
      const changed = gone === undefined
        ? newer.find((f) => sha256File(f.file, buffer) !== f.sha)
        : undefined;
      if (gone === undefined && changed === undefined) {
        present++;
        for (const f of files) expected.add(f.file!);
        if (cell >= 0) setPresent(store, cell, intent, recorded);
        continue;
      }
      if (changed !== undefined) recordedChanged++;
      else notPresent++;
      missing.add(position);
      // Its other files are still the block's own (the rebuild replaces them), not unexpected.
      for (const f of files) if (f.file !== null) expected.add(f.file);
      appends.push({
        t: "drop",
        index: intent.index,
        why: changed !== undefined
          ? `output changed since it was recorded: ${changed.file}`
          : `output missing: ${gone?.file ?? "an output no longer declared"}`,
      });
    } else {
      const whole = files.every((f) =>
        f.file !== null && sizeMatches(f.file, f.size) && sha256File(f.file, buffer) === f.sha
      );
      if (whole) {
        adopted++;
        for (const f of files) expected.add(f.file!);
        appends.push({ t: "commit", index: intent.index, adopted: true });
        if (cell >= 0) setPresent(store, cell, intent, recorded);
        continue;
      }
      rolledBack++;
      rolledBackAt.add(position);
      // A commit cut short: what it moved into place is not a whole block; remove it
      // (not in plan, which passes no manifest and changes nothing on disk).
      for (const f of files) {
        if (f.file !== null && manifest !== null) {
          fs.rmSync(f.file, { recursive: true, force: true });
        }
      }
      appends.push({
        t: "drop",
        index: intent.index,
        why: "a commit cut short by a crash, rolled back",
      });
    }
    if (cell >= 0) {
      store.done[cell] = 0;
      if (store.provenance !== null) store.provenance.outputs[cell] = OUTPUTS_NONE;
    }
  }
  // A done byte without a durable record is a claim the disk cannot back: rebuild.
  let neverBuilt = 0;
  for (let p = 0; p < layout.blockCount; p++) {
    const cell = layout.trackingCellOf(p);
    if (cell < 0 || recorded[cell] === 1) continue;
    if (store.done[cell] === 1) store.done[cell] = 0;
    if (!missing.has(p) && !rolledBackAt.has(p) && !reset.has(p)) neverBuilt++;
  }
  if (manifest !== null) manifest.append(appends);
  const unexpected = unexpectedFiles(plans, expected);
  return {
    summary: {
      task: task.id,
      recordedAndPresent: present,
      adopted,
      recordedNotPresent: notPresent,
      recordedChanged,
      rolledBack,
      neverBuilt,
      reset: reset.size,
      unexpected: unexpected.count,
      unexpectedExamples: unexpected.examples,
      stagingRemoved,
      unreadableLines: contents.unreadable,
      foreignLines: contents.foreignLines,
      foreignCount: contents.foreignCount,
      deletedTemporaries: tombstoned,
    },
    missing,
    reset,
  };
}

/** A block whose recorded outputs are all in place: done, with their content and state. */
function setPresent(
  store: ReconcileStore,
  cell: number,
  intent: IntentRecord,
  recorded: Uint8Array,
): void {
  store.done[cell] = 1;
  recorded[cell] = 1;
  setContent(store, cell, intent);
  // A kill between the commit record and the run's own bookkeeping leaves the state unset.
  if (store.provenance !== null) store.provenance.outputs[cell] = OUTPUTS_PRESENT;
}

function setContent(store: ReconcileStore, cell: number, intent: IntentRecord): void {
  const p = store.provenance;
  if (p !== null && /^[0-9a-f]{16}/.test(intent.content)) {
    hexPrefixWords(intent.content, p.content, 2 * cell);
  }
}

/** Slack for the clocks of the node that recorded a block and of the file server. */
const CLOCK_SLACK_MS = 2_000;

function sizeMatches(file: string, size: number): boolean {
  const found = pathSize(file);
  return found === A_FOLDER || found === size;
}

/** Remove every staging folder of this task under its outputs; returns how many block folders went. */
export function sweepStaging(plans: readonly OutputPlan[], taskId: string): number {
  let removed = 0;
  for (const base of new Set(plans.map((p) => p.base))) {
    const staging = path.join(base, STAGING_FOLDER);
    let runs: string[];
    try {
      runs = fs.readdirSync(staging);
    } catch {
      continue;
    }
    for (const run of runs) {
      // A live run's staging (this run's own, or another task's run) is never swept.
      if (liveOwner(path.join(staging, run)) !== null) continue;
      const mine = path.join(staging, run, taskId);
      try {
        removed += leftoverBlocks(mine);
        fs.rmSync(mine, { recursive: true, force: true });
      } catch {
        // nothing of this task's there
      }
      const left = fs.readdirSync(path.join(staging, run));
      if (left.length === 1 && left[0] === OWNER_FILE) {
        fs.rmSync(path.join(staging, run, OWNER_FILE), { force: true });
      }
      removeIfEmpty(path.join(staging, run));
    }
    removeIfEmpty(staging);
  }
  return removed;
}

/**
 * The blocks a task's staging folder holds: a Zarr output's block folders (named by grid index)
 * and the staged files of each path output's folder (named after the output), in its lane
 * folders (one hex digit; a staged block is named `<grid index>-<file name>`, so never that).
 */
function leftoverBlocks(taskStaging: string): number {
  let n = 0;
  for (const entry of fs.readdirSync(taskStaging, { withFileTypes: true })) {
    if (/^[0-9]/.test(entry.name) || !entry.isDirectory()) {
      n++;
      continue;
    }
    const output = path.join(taskStaging, entry.name);
    for (const staged of fs.readdirSync(output, { withFileTypes: true })) {
      const lane = staged.isDirectory() && /^[0-9a-f]$/.test(staged.name);
      n += lane ? fs.readdirSync(path.join(output, staged.name)).length : 1;
    }
  }
  return n;
}

function removeIfEmpty(dir: string): void {
  try {
    fs.rmdirSync(dir);
  } catch {
    // Not empty (another task's staging), or gone.
  }
}

/**
 * Files under the outputs that look like block outputs (a path matching an output's template,
 * or a chunk key of a Zarr output) but that no committed record names.
 */
function unexpectedFiles(
  plans: readonly OutputPlan[],
  expected: ReadonlySet<string>,
): { count: number; examples: string[] } {
  let count = 0;
  const examples: string[] = [];
  let seen = 0;
  for (const plan of plans) {
    const pattern = outputPattern(plan);
    const depth = plan.kind === "path" ? plan.relative.split("/").length : 64;
    const visit = (dir: string, rel: string, level: number) => {
      const entries = listFolder(dir);
      if (entries === null) return;
      for (const e of entries) {
        if (++seen > UNEXPECTED_LIMIT) return;
        if (level === 0 && e.name === STAGING_FOLDER) continue;
        const sub = rel === "" ? e.name : `${rel}/${e.name}`;
        const full = dir.endsWith(path.sep) ? dir + e.name : dir + path.sep + e.name;
        // A chunk key names a file; the folders on its way (c, c/0) are walked through.
        if (pattern.test(sub) && (plan.kind === "path" || !e.folder)) {
          if (!expected.has(full) && !(e.folder && hasExpectedBelow(full, expected))) {
            count++;
            if (examples.length < 3) examples.push(full);
          }
          continue;
        }
        if (e.folder && level + 1 < depth) visit(full, sub, level + 1);
      }
    };
    visit(plan.base, "", 0);
  }
  return { count, examples };
}

function hasExpectedBelow(dir: string, expected: ReadonlySet<string>): boolean {
  const prefix = dir + path.sep;
  for (const file of expected) if (file.startsWith(prefix)) return true;
  return false;
}

/** What a block's output path (below the base) looks like. */
function outputPattern(plan: OutputPlan): RegExp {
  if (plan.kind === "zarr") {
    const sep = plan.keyEncoding.separator === "/" ? "/" : "\\.";
    return plan.keyEncoding.name === "default"
      ? new RegExp(`^c(${sep}\\d+)*$`)
      : new RegExp(`^\\d+(${sep}\\d+)*$`);
  }
  const source = plan.relative
    .split(/(\{\{|\}\}|\{[a-z_]+\})/)
    .map((part) =>
      part === "{{"
        ? "\\{"
        : part === "}}"
        ? "\\}"
        : /^\{[a-z_]+\}$/.test(part)
        ? "[^/]+"
        : part.replace(/[.*+?^$()|[\]\\]/g, "\\$&")
    )
    .join("");
  return new RegExp(`^${source}$`);
}

/** The reconcile summary in one line, as the run prints it: the counts that are not zero. */
export function describeReconcile(s: ReconcileSummary): string {
  const parts = [`${s.recordedAndPresent} recorded and present`];
  if (s.deletedTemporaries > 0) parts.push(`${s.deletedTemporaries} deleted temporaries`);
  const add = (n: number, text: string) => {
    if (n > 0) parts.push(`${n} ${text}`);
  };
  add(s.adopted, "adopted (complete but unrecorded: a run stopped between rename and record)");
  add(s.recordedNotPresent, "recorded but missing (rebuilt)");
  add(s.recordedChanged, "recorded but changed since (rebuilt)");
  add(s.rolledBack, "rolled back (a commit cut short)");
  add(s.neverBuilt, "never built");
  add(s.reset, "reset (run again)");
  add(
    s.unexpected,
    `unexpected file${s.unexpected === 1 ? "" : "s"} no record names (left alone${
      s.unexpectedExamples.length > 0 ? `, e.g. ${s.unexpectedExamples[0]}` : ""
    })`,
  );
  add(s.stagingRemoved, "staging leftovers removed");
  add(s.unreadableLines - s.foreignCount, "torn manifest line(s) ignored");
  add(
    s.foreignCount,
    `unreadable manifest line${s.foreignCount === 1 ? "" : "s"} ignored (line ${
      s.foreignLines.join(", ")
    }${
      s.foreignCount > s.foreignLines.length ? ", ..." : ""
    } of manifest.jsonl: not a record blockwise writes, so something else changed the file)`,
  );
  return `Task "${s.task}": outputs reconciled: ${parts.join(", ")}`;
}
