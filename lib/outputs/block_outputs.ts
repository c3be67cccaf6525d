/**
 * A block's outputs on the worker's side: the staging locations `process` (or a command) writes
 * to, and, once it returned, what it wrote: every staged file with its size and SHA-256, checked
 * against what the block may write (a Zarr output: only the chunk files its write ROI covers),
 * and the block's content hash over all of them. Hashing happens here, where the data is; the
 * scheduler only renames and records.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { createHash } from "node:crypto";
import type { Block } from "../pipeline/spec.ts";
import type { BlockCommit, StagedFile } from "../run/block_report.ts";
import type { OutputPlan } from "./output_plan.ts";
import { ownedChunkKeys, relativeOutputPath, stagedLocation } from "./staging.ts";

const METADATA_FILES = new Set(["zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"]);
const READ_CHUNK = 1 << 20;

export class BlockOutputs {
  readonly #plans: readonly OutputPlan[];
  readonly #runId: string;
  readonly #buffer = new Uint8Array(READ_CHUNK);
  readonly #madeFolders = new Set<string>();

  constructor(plans: readonly OutputPlan[], runId: string) {
    this.#plans = plans;
    this.#runId = runId;
  }

  get empty(): boolean {
    return this.#plans.length === 0;
  }

  /** Make the block's staging locations (empty); returns where each output is written. */
  prepare(block: Block): Record<string, string> {
    const where: Record<string, string> = {};
    for (const plan of this.#plans) {
      const location = stagedLocation(plan, this.#runId, block);
      // A retry, or a run that died, may have left a previous attempt's files.
      if (plan.kind === "zarr") {
        fs.rmSync(location, { recursive: true, force: true });
        fs.mkdirSync(location, { recursive: true });
        for (const file of plan.metadataFiles) {
          fs.writeFileSync(path.join(location, file.name), file.text);
        }
      } else {
        // Staging is per run: a first attempt finds nothing there (a block handed back unrun
        // keeps its attempt, but never started).
        if (block.attempt > 1) fs.rmSync(location, { recursive: true, force: true });
        const folder = path.dirname(location);
        if (!this.#madeFolders.has(folder)) {
          fs.mkdirSync(folder, { recursive: true });
          this.#madeFolders.add(folder);
        }
      }
      where[plan.name] = location;
    }
    return where;
  }

  /**
   * Everything the block staged, hashed. Throws (the attempt fails) when a declared path output
   * is missing, or a Zarr output holds a file outside the block's chunks, naming it.
   */
  collect(block: Block, position: number): BlockCommit {
    const files: StagedFile[] = [];
    for (const plan of this.#plans) {
      const location = stagedLocation(plan, this.#runId, block);
      if (plan.kind === "path") {
        const relative = relativeOutputPath(plan, block);
        let fd: number;
        try {
          fd = fs.openSync(location, "r");
        } catch {
          throw new Error(
            `Block ${
              String(block.id)
            } did not write its output "${plan.name}" (${plan.written}): nothing at ${location}. Write it to context.outputs.${plan.name}.`,
          );
        }
        // Most outputs are one file: read it without a stat first; a folder fails the read.
        const single = this.#hash(plan.name, relative, fd);
        if (single !== null) {
          files.push(single);
          continue;
        }
        for (const sub of walk(location)) {
          const file = path.join(location, sub);
          files.push(this.#hashFile(plan.name, `${relative}/${sub}`, fs.openSync(file, "r")));
        }
        continue;
      }
      const owned = new Set(ownedChunkKeys(plan, block.writeRoi));
      for (const sub of walk(location)) {
        if (!sub.includes("/") && METADATA_FILES.has(sub)) continue;
        if (!owned.has(sub)) {
          const mine = [...owned];
          throw new Error(
            `Block ${
              String(block.id)
            } wrote chunk ${sub} of output "${plan.name}" (${plan.written}), outside its write ROI ${
              block.writeRoi.offset.join(",")
            } + ${block.writeRoi.shape.join(",")}; its chunks are ${
              mine.length <= 4
                ? mine.join(" ")
                : `${mine.slice(0, 3).join(" ")} ... (${mine.length})`
            }. Write only the block's write ROI.`,
          );
        }
        files.push(this.#hashFile(plan.name, sub, fs.openSync(path.join(location, sub), "r")));
      }
    }
    return { position, files, content: contentHash(files) };
  }

  /** Remove a block's staging (after a failed attempt). */
  discard(block: Block): void {
    for (const plan of this.#plans) {
      fs.rmSync(stagedLocation(plan, this.#runId, block), { recursive: true, force: true });
    }
  }

  /** Hash an open file (and close it). */
  #hashFile(output: string, relative: string, fd: number): StagedFile {
    const staged = this.#hash(output, relative, fd);
    if (staged === null) throw new Error(`Cannot hash ${relative}: it is a folder`);
    return staged;
  }

  /** Hash an open file (and close it); null when it is a folder. */
  #hash(output: string, relative: string, fd: number): StagedFile | null {
    const h = createHash("sha256");
    let size = 0;
    try {
      for (;;) {
        let n: number;
        try {
          n = fs.readSync(fd, this.#buffer, 0, READ_CHUNK, size);
        } catch (error) {
          if (size === 0 && (error as { code?: string }).code === "EISDIR") return null;
          throw error;
        }
        if (n <= 0) break;
        h.update(this.#buffer.subarray(0, n));
        size += n;
        // A short read is the end of a file nobody writes any more: save the empty read.
        if (n < READ_CHUNK) break;
      }
    } finally {
      fs.closeSync(fd);
    }
    return { output, path: relative, size, sha256: h.digest("hex") };
  }
}

/** The content hash of a block's files: order-independent, covers names and bytes. */
export function contentHash(files: readonly StagedFile[]): string {
  const lines = files.map((f) => `${f.output}/${f.path}\0${f.sha256}\n`).sort();
  const h = createHash("sha256");
  for (const line of lines) h.update(line);
  return h.digest("hex");
}

/** Files below `dir`, as `/`-separated relative paths, sorted. */
export function walk(dir: string): string[] {
  const out: string[] = [];
  const visit = (sub: string) => {
    const here = sub === "" ? dir : path.join(dir, sub);
    for (const entry of fs.readdirSync(here, { withFileTypes: true })) {
      const rel = sub === "" ? entry.name : `${sub}/${entry.name}`;
      if (entry.isDirectory()) visit(rel);
      else out.push(rel);
    }
  };
  visit("");
  return out.sort();
}
