/**
 * The append-only `manifest.jsonl` of a task's tracking store: one JSON object per line,
 * appended in batches with one write and one fsync, never rewritten. A torn last line (a kill
 * mid-append) is ignored on reading; a later record about a block supersedes an earlier one.
 *
 *   {"t":"intent","index":[1,2],"block":"17","files":[["stats","17.json",4096,"9f..."]],
 *    "content":"<sha256>","provenance":"<sha256>","recipe":0,"seconds":0.25,"at":"<iso>"}
 *   {"t":"commit","index":[1,2]}                  the intent's renames are all done
 *   {"t":"commit","index":[1,2],"adopted":true}   found complete after a crash, re-hashed
 *   {"t":"drop","index":[1,2],"why":"..."}         outputs gone or rolled back: rebuild
 *   {"t":"tombstone","index":[1,2],"content":"..."}  a temporary block's outputs deleted
 *   {"t":"nondeterministic","index":[1,2],"was":"...","now":"..."}  regenerated with other
 *                                                  content than its tombstone kept
 *
 * Blocks are keyed by grid index, which a grown volume keeps.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { forEachLine } from "../runtime/file_scan.ts";
import { fsyncAsync } from "../runtime/fs_sync.ts";

export const MANIFEST_FILE = "manifest.jsonl";

/** The `why` of a drop record written by `blockwise reset` (lib/outputs/reset_records.ts). */
export const RESET_WHY = "reset by blockwise reset";
const ENCODER = new TextEncoder();

/** A file of a block's outputs: output name, path below the output's base, size, SHA-256. */
export type ManifestFile = readonly [output: string, path: string, size: number, sha256: string];

export interface IntentRecord {
  readonly t: "intent";
  readonly index: readonly number[];
  readonly block: string;
  readonly files: readonly ManifestFile[];
  readonly content: string;
  readonly provenance: string;
  readonly recipe: number;
  readonly seconds: number;
  readonly at: string;
}

export type ManifestRecord =
  | IntentRecord
  | { readonly t: "commit"; readonly index: readonly number[]; readonly adopted?: boolean }
  | { readonly t: "drop"; readonly index: readonly number[]; readonly why: string }
  | { readonly t: "tombstone"; readonly index: readonly number[]; readonly content: string }
  | {
    readonly t: "nondeterministic";
    readonly index: readonly number[];
    readonly was: string;
    readonly now: string;
  };

/** What the manifest says about one block, after every record about it. */
export interface BlockEntry {
  /** The latest intent (its files and hashes), or null. */
  readonly intent: IntentRecord | null;
  /** "committed" / "intended" (no commit yet) / "dropped" / "tombstoned". */
  readonly state: "committed" | "intended" | "dropped" | "tombstoned";
  readonly adopted: boolean;
  /** Why it was dropped (the drop record's `why`), when `state` is "dropped"; else null. */
  readonly why: string | null;
}

export interface ManifestContents {
  readonly blocks: ReadonlyMap<string, BlockEntry>;
  /** Lines that could not be read (a torn last line from a kill counts here). */
  readonly unreadable: number;
  /**
   * Of those, lines that are not the start of a record blockwise writes (a torn append is, and
   * stays so when later appends follow it): the file was changed by something else. Their line
   * numbers (1-based), the first few.
   */
  readonly foreignLines: readonly number[];
  readonly foreignCount: number;
  /** Whether a regenerated block ever came back with other content (see Temporaries). */
  readonly nondeterministic: boolean;
  readonly lines: number;
}

export function indexKey(index: readonly number[]): string {
  return index.join(",");
}

const COMMIT_PREFIX = '{"t":"commit","index":[';

/**
 * One record as a JSON line. The two a commit writes per block (an intent and a commit) are
 * built by hand: they are most of every manifest, and the same text as JSON.stringify gives.
 */
export function serializeRecord(r: ManifestRecord): string {
  if (r.t === "commit" && r.adopted === undefined) return `${COMMIT_PREFIX}${r.index.join(",")}]}`;
  if (r.t !== "intent" || !Number.isFinite(r.seconds)) return JSON.stringify(r);
  return `{"t":"intent","index":[${r.index.join(",")}],"block":${JSON.stringify(r.block)},"files":${
    JSON.stringify(r.files)
  },"content":${JSON.stringify(r.content)},"provenance":${
    JSON.stringify(r.provenance)
  },"recipe":${r.recipe},"seconds":${r.seconds},"at":${JSON.stringify(r.at)}}`;
}

/** Read a store's manifest (missing: empty). */
export function readManifest(storeDir: string): ManifestContents {
  // Entries are updated in place: a later record about a block supersedes an earlier one.
  const blocks = new Map<string, { -readonly [K in keyof BlockEntry]: BlockEntry[K] }>();
  let unreadable = 0;
  let lines = 0;
  let lineNumber = 0;
  let foreignCount = 0;
  const foreignLines: number[] = [];
  let nondeterministic = false;
  const unreadableLine = (line: string) => {
    unreadable++;
    if (line.startsWith('{"t":"')) return; // a record cut short by a kill mid-append
    foreignCount++;
    if (foreignLines.length < 5) foreignLines.push(lineNumber);
  };
  const settle = (
    key: string,
    state: BlockEntry["state"],
    adopted: boolean,
    why: string | null = null,
  ) => {
    const before = blocks.get(key);
    if (before === undefined) {
      // A commit without its intent says nothing; a drop or tombstone alone keeps no files.
      if (state !== "committed") blocks.set(key, { intent: null, state, adopted: false, why });
    } else if (state !== "committed" || before.intent !== null) {
      before.state = state;
      before.adopted = adopted;
      before.why = why;
    }
  };
  forEachLine(path.join(storeDir, MANIFEST_FILE), (line) => {
    lineNumber++;
    if (line === "") return;
    lines++;
    // A plain commit record (half of every manifest), without the JSON parser: its index text
    // is the block's key as it stands.
    if (line.startsWith(COMMIT_PREFIX) && line.endsWith("]}")) {
      const key = line.slice(COMMIT_PREFIX.length, -2);
      if (/^-?\d+(,-?\d+)*$/.test(key)) {
        settle(key, "committed", false);
        return;
      }
    }
    let record: ManifestRecord;
    try {
      record = JSON.parse(line) as ManifestRecord;
    } catch {
      unreadableLine(line);
      return;
    }
    if (typeof record !== "object" || record === null || !Array.isArray(record.index)) {
      unreadableLine(line);
      return;
    }
    const key = indexKey(record.index);
    switch (record.t) {
      case "intent": {
        const before = blocks.get(key);
        if (before === undefined) {
          blocks.set(key, { intent: record, state: "intended", adopted: false, why: null });
        } else {
          before.intent = record;
          before.state = "intended";
          before.adopted = false;
          before.why = null;
        }
        break;
      }
      case "commit":
        settle(key, "committed", record.adopted === true);
        break;
      case "drop":
        settle(key, "dropped", false, typeof record.why === "string" ? record.why : null);
        break;
      case "tombstone":
        settle(key, "tombstoned", false);
        break;
      case "nondeterministic":
        nondeterministic = true;
        break;
      default:
        unreadableLine(line);
    }
  });
  return { blocks, unreadable, foreignLines, foreignCount, lines, nondeterministic };
}

/** The writer of one store's manifest: batches of records, each batch durable when it returns. */
export class ManifestWriter {
  readonly path: string;
  #fd: number | null;

  constructor(storeDir: string) {
    this.path = path.join(storeDir, MANIFEST_FILE);
    this.#fd = fs.openSync(this.path, "a+");
    // A kill mid-append leaves a torn last line: end it, so the next record starts a line.
    const size = fs.fstatSync(this.#fd).size;
    if (size > 0) {
      const last = new Uint8Array(1);
      fs.readSync(this.#fd, last, 0, 1, size - 1);
      if (last[0] !== 0x0a) fs.writeSync(this.#fd, "\n");
    }
  }

  /** Append records with one write and one fsync. */
  append(records: readonly ManifestRecord[]): void {
    if (records.length === 0) return;
    fs.fsyncSync(this.#write(records));
  }

  /**
   * Append records with one write, without waiting for them to be durable: the caller makes
   * them durable with `sync()`, or with a `syncfs` of the store's filesystem.
   */
  write(records: readonly ManifestRecord[]): void {
    if (records.length > 0) this.#write(records);
  }

  /** fsync what was written (on the runtime's I/O threads). */
  async sync(): Promise<void> {
    await fsyncAsync(this.#live());
  }

  #write(records: readonly ManifestRecord[]): number {
    const fd = this.#live();
    let text = "";
    for (const r of records) text += serializeRecord(r) + "\n";
    const bytes = ENCODER.encode(text);
    let written = 0;
    while (written < bytes.length) {
      written += fs.writeSync(fd, bytes, written, bytes.length - written);
    }
    return fd;
  }

  close(): void {
    if (this.#fd === null) return;
    fs.closeSync(this.#fd);
    this.#fd = null;
  }

  #live(): number {
    if (this.#fd === null) throw new Error(`The manifest ${this.path} was closed`);
    return this.#fd;
  }
}
