/**
 * Group commit of block outputs. A block's staged files were hashed by its worker; here, for
 * batches of blocks at once, each batch goes through four steps separated by two barriers
 * (a barrier makes everything written before it durable: one `syncfs` per filesystem, else an
 * fsync of each file, folder and manifest concerned):
 *   1. an intent record per block (its files and hashes) is written to its task's manifest;
 *      barrier: the intents and the staged data are durable;
 *   2. every staged file (or folder) is renamed into place; barrier: the renames are durable;
 *   3. a commit record per block is written, durable with the next barrier (or the manifests'
 *      fsync at the end): it only spares the next start from hashing the block's files;
 *   4. the blocks' promises resolve, so the ledger marks them done and their downstream blocks
 *      are released.
 * The steps are pipelined: one barrier serves two batches at once (the intents of the newest,
 * the renames of the one before), so a barrier costs per batch, not per step, and a block is
 * never reported done before its intent and its files are durable. A crash at any step leaves
 * what `reconcile` repairs: staged leftovers (swept), an intent whose files are all in place
 * with matching hashes (adopted: this is also a done block whose commit record was lost), or
 * one that is not (rolled back and rebuilt).
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { fsyncFileAsync, renameAll, syncFilesystem } from "../runtime/fs_sync.ts";
import type { Block } from "../pipeline/spec.ts";
import type { BlockCommit } from "../run/block_report.ts";
import { crashAfterOf, crashPoint } from "./crash_points.ts";
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
  /** Called once the block's files are in place, before the barrier that makes that durable. */
  readonly onRenamed?: () => void;
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

/** A batch this big is taken at once; a smaller first one waits up to LINGER_MS for company. */
const GROUP = 256;
const LINGER_MS = 5;
/** Barriers whose median duration pacing reads. */
const RECENT_BARRIERS = 15;

/** Renames that finished: the blocks whose every file moved, and the folders moved into. */
interface Renamed {
  readonly blocks: Pending[];
  readonly folders: readonly string[];
}

export class OutputCommitter {
  readonly #runId: string;
  #queue: Pending[] = [];
  #flushing: Promise<void> | null = null;
  readonly #madeFolders = new Set<string>();
  /** Blocks whose intents are durable, waiting for their renames. */
  #intended: Pending[] = [];
  /** The renames in progress (at most one batch at a time), and their outcome once known. */
  #renaming: Promise<void> | null = null;
  #renamed: Renamed | null = null;
  /** The blocks the running turn took (its new batch and the renamed ones) until it ends. */
  #inTurn: readonly Pending[] = [];
  /** Manifests written since the last barrier. */
  readonly #written = new Set<ManifestWriter>();
  /** The last barriers' durations (ms), and their median: what pacing reads of the disk. */
  readonly #recentBarriers: number[] = [];
  #barrierMs = 0;

  constructor(runId: string) {
    this.#runId = runId;
  }

  /** Commit one block's outputs; resolves once its intent and its renames are durable. */
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

  get #busy(): boolean {
    return this.#queue.length + this.#intended.length > 0 ||
      this.#renaming !== null || this.#renamed !== null;
  }

  async #flushLoop(): Promise<void> {
    try {
      // Let the results of other messages (and of other workers) join the first batch; later
      // ones grow while a barrier waits for the disk (no cap: the backlog is the batch).
      const started = performance.now();
      do {
        await new Promise((r) => setTimeout(r, 1));
      } while (this.#queue.length < GROUP && performance.now() - started < LINGER_MS);
      while (this.#busy) {
        try {
          await this.#step();
        } catch (error) {
          await this.#failEverything(error as Error);
        }
        // Results that arrived meanwhile join the next batch.
        await new Promise((r) => setTimeout(r, 0));
      }
    } finally {
      this.#flushing = null;
    }
  }

  /**
   * A barrier failed (the disk refused an fsync): nothing in flight is known durable, so every
   * block in flight fails its attempt (and is retried); the next start reconciles what reached
   * the disk.
   */
  async #failEverything(error: Error): Promise<void> {
    await this.#renaming;
    const all = [
      ...this.#inTurn,
      ...(this.#renamed?.blocks ?? []),
      ...this.#intended,
      ...this.#queue,
    ];
    this.#inTurn = [];
    this.#renamed = null;
    this.#intended = [];
    this.#queue = [];
    const failure = new Error(`commit failed: ${error.message}`);
    for (const p of all) p.reject(failure);
  }

  /**
   * One turn of the pipeline: the new batch's intents are written; renames that finished
   * before the barrier starts are covered by it; after the barrier, the covered blocks get their
   * commit records and are done, and every block with a durable intent is renamed (while the
   * next barrier runs: renames and barriers overlap).
   */
  async #step(): Promise<void> {
    const fresh = this.#queue;
    this.#queue = [];
    // Until the turn ends, a failure anywhere in it (a manifest write on a full disk, a barrier)
    // must fail these blocks too: they are in no other list meanwhile.
    this.#inTurn = fresh;
    if (fresh.length > 0) {
      crashPoint("commit:staged");
      const at = new Date().toISOString();
      this.#write(fresh, (p) => ({
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
    }
    const covered = this.#renamed;
    this.#renamed = null;
    if (covered !== null) this.#inTurn = [...fresh, ...covered.blocks];
    if (fresh.length === 0 && covered === null) {
      // Nothing for a barrier to make durable: start or wait for renames.
      if (this.#renaming === null) this.#startRenames();
      else await this.#renaming;
      return;
    }
    const started = performance.now();
    await this.#barrier(fresh, covered);
    this.#timed(performance.now() - started);
    if (covered !== null && covered.blocks.length > 0) {
      // The renames are durable: the blocks are committed. Their commit records only spare the
      // next start from hashing their files (an intent whose files all match is adopted), so the
      // blocks are done now and the records become durable with the next barrier (or the fsync
      // of the manifests at the end), before any later record about these blocks can be.
      crashPoint("commit:renamed");
      this.#write(covered.blocks, (p) => ({ t: "commit", index: p.request.block.index }));
      crashPoint("commit:recorded");
      for (const p of covered.blocks) {
        // A path output's staged file was renamed away; a Zarr output leaves the array copy.
        for (const plan of p.request.plans) {
          if (plan.kind === "zarr") {
            removeQuietly(blockStagingRoot(plan, this.#runId, p.request.block));
          }
        }
        p.resolve();
      }
    }
    this.#intended.push(...fresh);
    this.#inTurn = [];
    if (this.#renaming === null) this.#startRenames();
  }

  /** Median duration of the last RECENT_BARRIERS barriers, in ms (0 before the first). */
  get barrierMs(): number {
    return this.#barrierMs;
  }

  #timed(ms: number): void {
    const recent = this.#recentBarriers;
    recent.push(ms);
    if (recent.length > RECENT_BARRIERS) recent.shift();
    this.#barrierMs = [...recent].sort((a, b) => a - b)[recent.length >> 1]!;
  }

  /** Rename every block whose intent is durable, in the background. */
  #startRenames(): void {
    if (this.#intended.length === 0) return;
    const batch = this.#intended;
    this.#intended = [];
    this.#renaming = this.#renameInto(batch).catch((error: Error) => {
      for (const p of batch) p.reject(new Error(`commit failed: ${error.message}`));
      return { blocks: [], folders: [] };
    }).then((renamed) => {
      // Renames that no barrier covered yet may be waiting still: they wait together.
      const waiting = this.#renamed;
      this.#renamed = waiting === null ? renamed : {
        blocks: [...waiting.blocks, ...renamed.blocks],
        folders: [...waiting.folders, ...renamed.folders],
      };
      this.#renaming = null;
      for (const p of renamed.blocks) p.request.onRenamed?.();
    });
  }

  /**
   * Make durable what was written since the last barrier: the manifests, the new batch's
   * staged data (`fresh`), the renames that finished (`covered`).
   */
  async #barrier(fresh: readonly Pending[], covered: Renamed | null): Promise<void> {
    const manifests = [...this.#written];
    this.#written.clear();
    const paths = new Set<string>();
    for (const p of [...fresh, ...(covered?.blocks ?? [])]) {
      for (const plan of p.request.plans) paths.add(plan.base);
    }
    for (const m of manifests) paths.add(m.path);
    let synced = paths.size > 0;
    for (const where of await distinctFilesystems(paths)) {
      if (!(await syncFilesystem(where))) synced = false;
    }
    if (synced) return;
    await Promise.all([
      ...fresh.flatMap((p) => p.units.map((u) => fsyncTree(u.from, u.folder))),
      ...(covered?.folders ?? []).map((dir) => fsyncFileAsync(dir)),
      ...manifests.map((m) => m.sync()),
    ]);
  }

  /** Rename the batch's files into place; a block whose rename fails is dropped and fails. */
  async #renameInto(batch: readonly Pending[]): Promise<Renamed> {
    const failed = new Map<Pending, Error>();
    const folders = new Set<string>();
    const from: string[] = [];
    const to: string[] = [];
    const owner: Pending[] = [];
    for (const p of batch) {
      for (const u of p.units) {
        try {
          folders.add(this.#parentOf(u.to));
          if (u.folder && fs.existsSync(u.to)) {
            this.#replaceFolder(u, p.request);
            crashPoint("commit:rename");
            continue;
          }
        } catch (error) {
          failed.set(p, error as Error);
          continue;
        }
        from.push(u.from);
        to.push(u.to);
        owner.push(p);
      }
    }
    const errors = await renameAll(from, to, crashAfterOf("commit:rename", from.length));
    errors.forEach((error, i) => {
      if (error !== null && !failed.has(owner[i]!)) failed.set(owner[i]!, error);
    });
    const done: Pending[] = [];
    for (const p of batch) {
      const error = failed.get(p);
      if (error === undefined) {
        done.push(p);
        continue;
      }
      p.request.manifest.append([{
        t: "drop",
        index: p.request.block.index,
        why: `commit failed: ${error.message}`,
      }]);
      p.reject(error);
    }
    return { blocks: done, folders: [...folders] };
  }

  #write(batch: readonly Pending[], record: (p: Pending) => ManifestRecord): void {
    const byManifest = new Map<ManifestWriter, ManifestRecord[]>();
    for (const p of batch) {
      const list = byManifest.get(p.request.manifest);
      if (list === undefined) byManifest.set(p.request.manifest, [record(p)]);
      else list.push(record(p));
    }
    for (const [manifest, records] of byManifest) {
      manifest.write(records);
      this.#written.add(manifest);
    }
  }

  /** The folder `target` goes into, made if this run has not made it yet. */
  #parentOf(target: string): string {
    const cut = target.lastIndexOf(path.sep);
    const parent = cut > 0 ? target.slice(0, cut) : path.dirname(target);
    if (!this.#madeFolders.has(parent)) {
      fs.mkdirSync(parent, { recursive: true });
      this.#madeFolders.add(parent);
    }
    return parent;
  }

  /**
   * A folder cannot replace a non-empty folder: move the old one into this run's staging
   * (swept at the next start if we die before removing it).
   */
  #replaceFolder(unit: Unit, request: CommitRequest): void {
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
}

/** One path per filesystem among `paths` (by device number; a missing path stands alone). */
async function distinctFilesystems(paths: Iterable<string>): Promise<string[]> {
  const byDevice = new Map<number | string, string>();
  for (const where of paths) {
    const device = deviceCache.get(where) ?? await deviceOf(where);
    deviceCache.set(where, device);
    if (!byDevice.has(device)) byDevice.set(device, where);
  }
  return [...byDevice.values()];
}

const deviceCache = new Map<string, number | string>();

function deviceOf(where: string): Promise<number | string> {
  return new Promise((resolve) =>
    fs.stat(where, (error, stats) => resolve(error === null ? stats.dev : where))
  );
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
