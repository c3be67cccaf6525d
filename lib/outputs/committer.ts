/**
 * Group commit of block outputs. A block's staged files were hashed by its worker; here, for a
 * batch of blocks at once:
 *   1. the staged data is made durable (one `syncfs` per filesystem, else fsync per file),
 *   2. an intent record per block (its files and hashes) is appended to its task's manifest
 *      and fsynced,
 *   3. every staged file (or folder) is renamed into place, and the renames made durable,
 *   4. a commit record per block is appended and fsynced,
 * and only then are the blocks' promises resolved, so the ledger marks them done and their
 * downstream blocks are released. A crash at any step leaves what `reconcile` repairs: staged
 * leftovers (swept), an intent whose files are all in place with matching hashes (adopted), or
 * one that is not (rolled back and rebuilt). Batching makes the fsyncs cost per batch, not per
 * block; a block is never reported done before its records are durable.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { fsyncFile, syncFilesystem } from "../runtime/fs_sync.ts";
import type { Block } from "../pipeline/spec.ts";
import type { BlockCommit } from "./block_outputs.ts";
import { crashPoint } from "./crash_points.ts";
import type { ManifestRecord, ManifestWriter } from "./manifest.ts";
import type { OutputPlan } from "./output_plan.ts";
import { STAGING_FOLDER } from "./output_plan.ts";
import {
  blockStagingRoot,
  finalLocation,
  relativeOutputPath,
  runStagingRoot,
  stagedLocation,
} from "./staging.ts";

/** Everything needed to commit one block. */
export interface CommitRequest {
  readonly block: Block;
  readonly plans: readonly OutputPlan[];
  readonly commit: BlockCommit;
  readonly manifest: ManifestWriter;
  readonly provenance: string;
  readonly recipe: number;
  readonly seconds: number;
}

/** One rename of a commit: a staged file, or a staged folder (a path output that is a folder). */
interface Unit {
  readonly from: string;
  readonly to: string;
  readonly folder: boolean;
}

interface Pending {
  readonly request: CommitRequest;
  readonly units: readonly Unit[];
  resolve(): void;
  reject(error: Error): void;
}

const MAX_BATCH = 512;

export class OutputCommitter {
  readonly #runId: string;
  #queue: Pending[] = [];
  #flushing: Promise<void> | null = null;
  readonly #madeFolders = new Set<string>();

  constructor(runId: string) {
    this.#runId = runId;
  }

  /** Commit one block's outputs; resolves once they are in place and recorded durably. */
  commit(request: CommitRequest): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, units: this.#units(request), resolve, reject });
      if (this.#flushing === null) this.#flushing = this.#flushLoop();
    });
  }

  /** Wait for everything queued to be committed (or to fail). */
  async drain(): Promise<void> {
    while (this.#flushing !== null) await this.#flushing;
  }

  async #flushLoop(): Promise<void> {
    // Let the results of the same message (and of other workers) join this batch.
    await new Promise((r) => setTimeout(r, 0));
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, MAX_BATCH);
        await this.#flush(batch);
      }
    } finally {
      this.#flushing = null;
    }
  }

  #units(request: CommitRequest): Unit[] {
    const { block, plans, commit } = request;
    const units: Unit[] = [];
    for (const plan of plans) {
      const staged = stagedLocation(plan, this.#runId, block);
      if (plan.kind === "path") {
        const mine = commit.files.filter((f) => f.output === plan.name);
        if (mine.length === 0) continue;
        const relative = relativeOutputPath(plan, block);
        const folder = !(mine.length === 1 && mine[0]!.path === relative);
        units.push({ from: staged, to: finalLocation(plan, relative), folder });
      } else {
        for (const f of commit.files) {
          if (f.output !== plan.name) continue;
          units.push({
            from: path.join(staged, ...f.path.split("/")),
            to: finalLocation(plan, f.path),
            folder: false,
          });
        }
      }
    }
    return units;
  }

  async #flush(batch: Pending[]): Promise<void> {
    // 1. The staged data on disk.
    const filesystems = new Set(batch.flatMap((p) => p.request.plans.map((plan) => plan.base)));
    for (const base of filesystems) {
      if (!(await syncFilesystem(base))) {
        for (const p of batch) for (const u of p.units) fsyncTree(u.from, u.folder);
      }
    }
    crashPoint("commit:staged");
    // 2. Intents, one write and one fsync per manifest.
    appendGrouped(batch, (p) => ({
      t: "intent",
      index: p.request.block.index,
      block: String(p.request.block.id),
      files: p.request.commit.files.map((f) => [f.output, f.path, f.size, f.sha256] as const),
      content: p.request.commit.content,
      provenance: p.request.provenance,
      recipe: p.request.recipe,
      seconds: p.request.seconds,
      at: new Date().toISOString(),
    }));
    crashPoint("commit:intent");
    // 3. Renames; a block whose rename fails is dropped from the batch and fails.
    const done: Pending[] = [];
    const folders = new Set<string>();
    for (const p of batch) {
      try {
        for (const u of p.units) {
          this.#rename(u, p.request);
          folders.add(path.dirname(u.to));
          crashPoint("commit:rename");
        }
        done.push(p);
      } catch (error) {
        p.request.manifest.append([{
          t: "drop",
          index: p.request.block.index,
          why: `commit failed: ${(error as Error).message}`,
        }]);
        p.reject(error as Error);
      }
    }
    for (const base of filesystems) {
      if (!(await syncFilesystem(base))) { for (const dir of folders) fsyncFile(dir); }
    }
    crashPoint("commit:renamed");
    // 4. Commit records.
    appendGrouped(done, (p) => ({ t: "commit", index: p.request.block.index }));
    crashPoint("commit:recorded");
    for (const p of done) {
      for (const plan of p.request.plans) {
        removeQuietly(blockStagingRoot(plan, this.#runId, p.request.block));
      }
      p.resolve();
    }
  }

  #rename(unit: Unit, request: CommitRequest): void {
    const parent = path.dirname(unit.to);
    if (!this.#madeFolders.has(parent)) {
      fs.mkdirSync(parent, { recursive: true });
      this.#madeFolders.add(parent);
    }
    if (unit.folder && fs.existsSync(unit.to)) {
      // A folder cannot replace a non-empty folder: move the old one into this run's staging
      // (swept at the next start if we die before removing it).
      const old = path.join(
        runStagingRoot(request.plans[0]!, this.#runId, request.block.taskId),
        "replaced",
        `${request.block.index.join("_")}-${path.basename(unit.to)}`,
      );
      fs.mkdirSync(path.dirname(old), { recursive: true });
      fs.rmSync(old, { recursive: true, force: true });
      fs.renameSync(unit.to, old);
      fs.renameSync(unit.from, unit.to);
      fs.rmSync(old, { recursive: true, force: true });
      return;
    }
    fs.renameSync(unit.from, unit.to);
  }
}

function appendGrouped(batch: readonly Pending[], record: (p: Pending) => ManifestRecord): void {
  const byManifest = new Map<ManifestWriter, ManifestRecord[]>();
  for (const p of batch) {
    const list = byManifest.get(p.request.manifest) ?? [];
    list.push(record(p));
    byManifest.set(p.request.manifest, list);
  }
  for (const [manifest, records] of byManifest) manifest.append(records);
}

function fsyncTree(target: string, folder: boolean): void {
  if (!folder) {
    fsyncFile(target);
    return;
  }
  for (const entry of fs.readdirSync(target, { withFileTypes: true })) {
    fsyncTree(path.join(target, entry.name), entry.isDirectory());
  }
  fsyncFile(target);
}

function removeQuietly(dir: string): void {
  if (!dir.includes(STAGING_FOLDER)) return;
  try {
    fs.rmSync(dir, { recursive: true, force: true });
  } catch {
    // The sweep at the next start removes it.
  }
}
