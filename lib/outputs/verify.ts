/**
 * `blockwise verify`: read-only checks of committed outputs.
 *
 * - `verifyStore`: every file of every committed block in the manifest is re-hashed where it
 *   lies (outputs.json says where each output lives) and compared with its recorded size and
 *   SHA-256; a done block with no committed record is reported too. Deleted temporaries
 *   (tombstones) and intents without a commit (a crash the next start reconciles) are counted,
 *   not checked.
 * - `compareStores`: two stores of one task, block by block, by the content hashes their
 *   manifests recorded (seed 003's resume-equivalence check: a killed-and-resumed run against
 *   a clean one). A tombstone keeps its block's content hash, so it compares like a commit.
 */

import * as path from "node:path";
import * as fs from "node:fs";
import { trackingArray } from "../tracking/arrays.ts";
import { checkHostByteOrder, readChunk } from "../tracking/chunk_reads.ts";
import { describeLiveWriter, liveWriter } from "../tracking/lock.ts";
import { readStoreMetadata } from "../tracking/store_metadata.ts";
import { sha256File } from "./inputs.ts";
import { indexKey, readManifest } from "./manifest.ts";
import { readOutputLocations } from "./output_locations.ts";

export interface VerifyProblem {
  readonly block: string;
  readonly index: readonly number[];
  readonly problem: "missing" | "modified" | "unrecorded" | "unknown output";
  /** The file at fault (absolute), or null for a block-level problem. */
  readonly file: string | null;
  readonly detail: string;
}

export interface StoreVerification {
  readonly task: string;
  readonly store: string;
  /** Committed blocks whose files were re-hashed. */
  readonly blocks: number;
  readonly files: number;
  readonly bytes: number;
  /** Blocks of a temporary task whose outputs were deleted (not checked). */
  readonly tombstoned: number;
  /** Intents without a commit record (the next run's start reconciles them; not checked). */
  readonly uncommitted: number;
  readonly problems: readonly VerifyProblem[];
  /** Why nothing was checked (no outputs recorded), or null. */
  readonly note: string | null;
  /** The run writing the store while it was verified (`pid ... on host ..., started ...`), or null. */
  readonly live_run: string | null;
}

export function verifyStore(storeDir: string): StoreVerification {
  checkHostByteOrder(storeDir);
  const meta = readStoreMetadata(storeDir);
  const layout = meta.layout;
  const writer = liveWriter(meta.path);
  // The done marks first, then the manifest: a run appends a block's intent before it marks the
  // block done, so every block done at this read has its record in the later one.
  const done = readChunk(meta, trackingArray("done"));
  const contents = readManifest(meta.path);
  const base = {
    task: meta.taskId,
    store: meta.path,
    blocks: 0,
    files: 0,
    bytes: 0,
    tombstoned: 0,
    uncommitted: 0,
    live_run: writer === null ? null : describeLiveWriter(writer),
  };
  const locations = readOutputLocations(meta.path);
  if (contents.lines === 0 && locations === null) {
    return { ...base, problems: [], note: "no outputs recorded (the task declares none)" };
  }
  const bases = new Map((locations ?? []).map((l) => [l.name, l.base]));
  const problems: VerifyProblem[] = [];
  const buffer = new Uint8Array(1 << 20);
  let blocks = 0;
  let files = 0;
  let bytes = 0;
  let tombstoned = 0;
  let uncommitted = 0;
  const recorded = new Set<string>();
  for (const [key, entry] of contents.blocks) {
    if (entry.state === "tombstoned") {
      tombstoned++;
      recorded.add(key);
      continue;
    }
    if (entry.state === "intended") {
      // Being committed by a live run, or left for the next start to adopt: not damage.
      uncommitted++;
      recorded.add(key);
    }
    if (entry.state !== "committed" || entry.intent === null) continue;
    recorded.add(key);
    blocks++;
    const intent = entry.intent;
    const at = { block: intent.block, index: intent.index };
    for (const [output, rel, size, sha] of intent.files) {
      const root = bases.get(output);
      if (root === undefined) {
        problems.push({
          ...at,
          problem: "unknown output",
          file: null,
          detail:
            `output "${output}" is not in ${meta.path}/outputs.json; run the pipeline once with this blockwise version to record where its outputs live`,
        });
        continue;
      }
      const file = path.join(root, ...rel.split("/"));
      files++;
      let stat: fs.Stats;
      try {
        stat = fs.statSync(file);
      } catch {
        problems.push({ ...at, problem: "missing", file, detail: "missing" });
        continue;
      }
      if (!stat.isFile()) {
        problems.push({ ...at, problem: "modified", file, detail: "not a file any more" });
        continue;
      }
      bytes += stat.size;
      if (stat.size !== size) {
        problems.push({
          ...at,
          problem: "modified",
          file,
          detail: `${stat.size} bytes, recorded ${size}`,
        });
        continue;
      }
      const now = sha256File(file, buffer);
      if (now !== sha) {
        problems.push({
          ...at,
          problem: "modified",
          file,
          detail: `SHA-256 ${now.slice(0, 12)}..., recorded ${sha.slice(0, 12)}...`,
        });
      }
    }
  }
  // A done mark the manifest cannot back: the next start rebuilds the block.
  for (let p = 0; p < layout.blockCount; p++) {
    const cell = layout.trackingCellOf(p);
    if (cell < 0 || done[cell] !== 1) continue;
    const index = layout.gridIndexOf(p);
    if (recorded.has(indexKey(index))) continue;
    problems.push({
      block: String(layout.blockIdOf(p)),
      index,
      problem: "unrecorded",
      file: null,
      detail: "marked done but the manifest has no committed record of its outputs",
    });
  }
  return { ...base, blocks, files, bytes, tombstoned, uncommitted, problems, note: null };
}

export interface StoreComparison {
  readonly task: string;
  readonly store: string;
  readonly against: string;
  /** Blocks with a content hash in both. */
  readonly compared: number;
  readonly only_in_store: readonly string[];
  readonly only_in_against: readonly string[];
  /** Blocks (grid index keys) whose content hashes differ. */
  readonly mismatched: readonly string[];
  readonly equivalent: boolean;
}

/** The content hash of every committed (or tombstoned) block, by grid index key. */
function contentsOf(storeDir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, entry] of readManifest(storeDir).blocks) {
    if ((entry.state === "committed" || entry.state === "tombstoned") && entry.intent !== null) {
      out.set(key, entry.intent.content);
    }
  }
  return out;
}

export function compareStores(storeDir: string, againstDir: string): StoreComparison {
  const meta = readStoreMetadata(storeDir);
  const other = readStoreMetadata(againstDir);
  const a = contentsOf(meta.path);
  const b = contentsOf(other.path);
  const onlyA: string[] = [];
  const mismatched: string[] = [];
  let compared = 0;
  for (const [key, content] of a) {
    const theirs = b.get(key);
    if (theirs === undefined) onlyA.push(key);
    else {
      compared++;
      if (theirs !== content) mismatched.push(key);
    }
  }
  const onlyB = [...b.keys()].filter((k) => !a.has(k));
  const order = (keys: string[]) =>
    keys.sort((x, y) => {
      const p = x.split(",").map(Number);
      const q = y.split(",").map(Number);
      for (let i = 0; i < p.length; i++) if (p[i] !== q[i]) return p[i]! - q[i]!;
      return 0;
    });
  return {
    task: meta.taskId,
    store: meta.path,
    against: other.path,
    compared,
    only_in_store: order(onlyA),
    only_in_against: order(onlyB),
    mismatched: order(mismatched),
    equivalent: onlyA.length === 0 && onlyB.length === 0 && mismatched.length === 0,
  };
}
