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
import { fsyncFileAsync, syncFilesystem } from "../runtime/fs_sync.ts";
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
  stagedPath,
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

/** A batch this big is flushed at once; a smaller one waits up to LINGER_MS for company. */
const GROUP = 256;
const LINGER_MS = 5;

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
    try {
      while (this.#queue.length > 0) {
        // Let the results of other messages (and of other workers) join this batch; while a
        // batch waits for the disk, the next one grows (no cap: the backlog is the batch).
        const started = performance.now();
        do {
          await new Promise((r) => setTimeout(r, 1));
        } while (this.#queue.length < GROUP && performance.now() - started < LINGER_MS);
        const batch = this.#queue;
        this.#queue = [];
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
      if (plan.kind === "path") {
        const mine = commit.files.filter((f) => f.output === plan.name);
        if (mine.length === 0) continue;
        const relative = relativeOutputPath(plan, block);
        const folder = !(mine.length === 1 && mine[0]!.path === relative);
        units.push({
          from: stagedPath(plan, this.#runId, block, relative),
          to: finalLocation(plan, relative),
          folder,
        });
      } else {
        const staged = stagedLocation(plan, this.#runId, block);
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
    // Every wait for the disk below is off this thread: results keep coming in meanwhile and
    // make the next batch (group commit sized by the disk's latency).
    // 1. The staged data on disk.
    const filesystems = new Set(batch.flatMap((p) => p.request.plans.map((plan) => plan.base)));
    for (const base of filesystems) {
      if (!(await syncFilesystem(base))) {
        await Promise.all(batch.flatMap((p) => p.units.map((u) => fsyncTree(u.from, u.folder))));
      }
    }
    crashPoint("commit:staged");
    // 2. Intents, one write and one fsync per manifest.
    const at = new Date().toISOString();
    await appendGrouped(batch, (p) => ({
      t: "intent",
      index: p.request.block.index,
      block: String(p.request.block.id),
      files: p.request.commit.files.map((f) => [f.output, f.path, f.size, f.sha256] as const),
      content: p.request.commit.content,
      provenance: p.request.provenance,
      recipe: p.request.recipe,
      seconds: p.request.seconds,
      at,
    }));
    crashPoint("commit:intent");
    // 3. Renames, on the runtime's I/O threads; a block whose rename fails is dropped from the
    // batch and fails.
    const folders = new Set<string>();
    const renamed = await Promise.all(batch.map(async (p) => {
      try {
        for (const u of p.units) {
          await this.#rename(u, p.request);
          folders.add(path.dirname(u.to));
          crashPoint("commit:rename");
        }
        return true;
      } catch (error) {
        p.request.manifest.append([{
          t: "drop",
          index: p.request.block.index,
          why: `commit failed: ${(error as Error).message}`,
        }]);
        p.reject(error as Error);
        return false;
      }
    }));
    const done = batch.filter((_, i) => renamed[i]);
    for (const base of filesystems) {
      if (!(await syncFilesystem(base))) {
        await Promise.all([...folders].map((dir) => fsyncFileAsync(dir)));
      }
    }
    crashPoint("commit:renamed");
    // 4. Commit records.
    await appendGrouped(done, (p) => ({ t: "commit", index: p.request.block.index }));
    crashPoint("commit:recorded");
    for (const p of done) {
      // A path output's staged file was renamed away; a Zarr output leaves the array copy.
      for (const plan of p.request.plans) {
        if (plan.kind === "zarr") {
          removeQuietly(blockStagingRoot(plan, this.#runId, p.request.block));
        }
      }
      p.resolve();
    }
  }

  async #rename(unit: Unit, request: CommitRequest): Promise<void> {
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
        ".replaced",
        `${request.block.index.join("_")}-${path.basename(unit.to)}`,
      );
      fs.mkdirSync(path.dirname(old), { recursive: true });
      fs.rmSync(old, { recursive: true, force: true });
      fs.renameSync(unit.to, old);
      fs.renameSync(unit.from, unit.to);
      fs.rmSync(old, { recursive: true, force: true });
      return;
    }
    await new Promise<void>((resolve, reject) =>
      fs.rename(unit.from, unit.to, (error) => (error === null ? resolve() : reject(error)))
    );
  }
}

async function appendGrouped(
  batch: readonly Pending[],
  record: (p: Pending) => ManifestRecord,
): Promise<void> {
  const byManifest = new Map<ManifestWriter, ManifestRecord[]>();
  for (const p of batch) {
    const list = byManifest.get(p.request.manifest) ?? [];
    list.push(record(p));
    byManifest.set(p.request.manifest, list);
  }
  await Promise.all([...byManifest].map(([manifest, records]) => manifest.appendAsync(records)));
}

async function fsyncTree(target: string, folder: boolean): Promise<void> {
  if (folder) {
    const entries = fs.readdirSync(target, { withFileTypes: true });
    await Promise.all(entries.map((e) => fsyncTree(path.join(target, e.name), e.isDirectory())));
  }
  await fsyncFileAsync(target);
}

function removeQuietly(dir: string): void {
  if (!dir.includes(STAGING_FOLDER)) return;
  try {
    fs.rmSync(dir, { recursive: true, force: true });
  } catch {
    // The sweep at the next start removes it.
  }
}
