/**
 * Making many files durable at once, and moving many files into place, without blocking the
 * thread that runs the scheduler. Group commit of block outputs writes hundreds of small files
 * and then needs them all on disk before it records them: one `fsync` per file costs about a
 * millisecond each, while Linux's `syncfs(fd)` writes back every dirty page of one filesystem in
 * a single call. It is reached through libc, off the calling thread, so the run loop keeps
 * dispatching and collecting results while the disk works (and the next commit batch grows
 * meanwhile):
 *   - Deno: an FFI symbol declared `nonblocking` (run on Deno's blocking-task threads),
 *   - Bun: a file helper thread (workers/sync_worker.ts) calls it through bun:ffi.
 * Elsewhere the caller falls back to fsync per file (`fsyncFile`, also off-thread).
 *
 * A second helper thread (Bun) renames a commit's files into place one after the other
 * (`renameAll`; elsewhere the calling thread does, in slices): renames into one folder
 * serialise on its lock in the kernel anyway, and issued all at once from the runtime's I/O
 * pool they spin on it instead, costing several times the CPU. A third removes files
 * (`removeAll`) when unlinking is too slow for the run loop.
 */

import * as fs from "node:fs";
import process from "node:process";
import { runtimeName } from "./detect.ts";
import { denoFfiState } from "./mmap_deno.ts";
import { embeddedModuleUrl } from "./worker_spawn.ts";

type SyncFs = (fd: number) => number;
type SyncFsAsync = (path: string) => Promise<boolean>;

/** What the helper thread is asked: `syncfs` of a path's filesystem, or a list of renames. */
export type HelperRequest =
  | { readonly id: number; readonly kind: "syncfs"; readonly path: string }
  | {
    readonly id: number;
    readonly kind: "rename";
    readonly from: readonly string[];
    readonly to: readonly string[];
    /** Kill the process (SIGKILL) after this many renames: crash tests; -1 never. */
    readonly killAfter: number;
  }
  | { readonly id: number; readonly kind: "remove"; readonly paths: readonly string[] };

interface HelperAnswer {
  readonly id: number;
  readonly ok: boolean;
  /** Why the request failed as a whole (the caller's promise rejects with it). */
  readonly error?: string;
  /** The helper thread died before it answered. */
  readonly stopped?: boolean;
  /** For renames and removals: [index, message] of each one that failed. */
  readonly failures?: readonly (readonly [number, string])[];
}

interface HelperWorker {
  onmessage: ((event: MessageEvent<HelperAnswer>) => void) | null;
  onerror: ((event: unknown) => void) | null;
  postMessage(message: HelperRequest): void;
  unref?: () => void;
}

type Ask = (request: DistributiveOmit<HelperRequest, "id">) => Promise<HelperAnswer>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Renames done on the calling thread between two turns of its event loop. */
const RENAME_SLICE = 128;

let binding: Promise<SyncFsAsync | null> | null = null;
/**
 * The helper threads: one waits on `syncfs`, one renames, one removes (an unlink that trims
 * the disk or crosses a network must not hold up a commit's renames).
 */
type HelperRole = "syncfs" | "rename" | "remove";
const helpers = new Map<HelperRole, Ask | null>();

function load(): Promise<SyncFsAsync | null> {
  binding ??= bind();
  return binding;
}

/** The blocking `syncfs` of this thread's runtime, or null. */
async function bindBlocking(): Promise<SyncFs | null> {
  if (process.platform !== "linux" || runtimeName() !== "bun") return null;
  try {
    const ffi = await import("bun:ffi") as unknown as {
      dlopen(lib: string, symbols: Record<string, { args: string[]; returns: string }>): {
        symbols: { syncfs: SyncFs };
      };
    };
    return ffi.dlopen("libc.so.6", { syncfs: { args: ["i32"], returns: "i32" } }).symbols.syncfs;
  } catch {
    return null;
  }
}

async function bind(): Promise<SyncFsAsync | null> {
  if (process.platform !== "linux") return null;
  if (runtimeName() === "deno") return denoNonblocking();
  if (runtimeName() !== "bun") return null;
  const blocking = await bindBlocking();
  if (blocking === null) return null;
  const ask = helperThread("syncfs");
  if (ask === null) return (path) => Promise.resolve(syncPath(blocking, path));
  return async (path) => {
    const answer = await ask({ kind: "syncfs", path });
    if (answer.stopped === true) return false; // fsync per file instead
    if (answer.error !== undefined) throw new Error(answer.error);
    return answer.ok;
  };
}

function syncPath(syncfs: SyncFs, path: string): boolean {
  const fd = fs.openSync(path, "r");
  try {
    return syncfs(fd) === 0;
  } finally {
    fs.closeSync(fd);
  }
}

function denoNonblocking(): SyncFsAsync | null {
  if (denoFfiState() !== "granted") return null;
  try {
    const d = (globalThis as unknown as {
      Deno: {
        dlopen(
          lib: string,
          symbols: Record<string, { parameters: string[]; result: string; nonblocking: boolean }>,
        ): { symbols: { syncfs(fd: number): Promise<number> } };
      };
    }).Deno;
    const syncfs = d.dlopen("libc.so.6", {
      syncfs: { parameters: ["i32"], result: "i32", nonblocking: true },
    }).symbols.syncfs;
    return async (path) => {
      const fd = fs.openSync(path, "r");
      try {
        return (await syncfs(fd)) === 0;
      } finally {
        fs.closeSync(fd);
      }
    };
  } catch {
    return null;
  }
}

/** The file helper thread for `role` (started once), or null when it cannot start. */
function helperThread(role: HelperRole): Ask | null {
  const known = helpers.get(role);
  if (known !== undefined) return known;
  helpers.set(role, null);
  // Deno cannot unref a worker: it would keep the process alive after the run.
  if (typeof Worker === "undefined" || runtimeName() !== "bun") return null;
  let worker: HelperWorker;
  try {
    worker = new Worker(embeddedModuleUrl("workers/sync_worker.ts").href, {
      type: "module",
      name: `file helper (${role})`,
    }) as unknown as HelperWorker;
  } catch {
    return null;
  }
  // It must not keep the process alive: callers await what they asked for.
  worker.unref?.();
  const waiting = new Map<number, (answer: HelperAnswer) => void>();
  let broken = false;
  let next = 0;
  worker.onmessage = (event) => {
    const answer = event.data;
    waiting.get(answer.id)?.(answer);
    waiting.delete(answer.id);
  };
  worker.onerror = () => {
    // syncfs callers fall back to fsync per file; renames fail and their blocks with them.
    broken = true;
    for (const [id, settle] of waiting) {
      settle({ id, ok: false, stopped: true });
    }
    waiting.clear();
  };
  const ask: Ask = (request) => {
    if (broken) return Promise.resolve({ id: -1, ok: false, stopped: true });
    return new Promise((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      worker.postMessage({ ...request, id } as HelperRequest);
    });
  };
  helpers.set(role, ask);
  return ask;
}

/**
 * Rename every `from[i]` to `to[i]`, in order, off this thread when a helper thread can run.
 * Resolves with the error of each rename that failed (null for those that did not); the process
 * is killed with SIGKILL right after the `killAfter`-th rename (crash tests; -1 never).
 */
export async function renameAll(
  from: readonly string[],
  to: readonly string[],
  killAfter = -1,
): Promise<(Error | null)[]> {
  const errors: (Error | null)[] = new Array(from.length).fill(null);
  if (from.length === 0) return errors;
  const ask = helperThread("rename");
  if (ask !== null) {
    const answer = await ask({ kind: "rename", from, to, killAfter });
    if (answer.stopped !== true) {
      for (const [i, message] of answer.failures ?? []) errors[i] = new Error(message);
      return errors;
    }
    // The helper is gone: do them here.
  }
  // On this thread, synchronously (one rename is some microseconds), letting the run loop in
  // between slices.
  for (let i = 0; i < from.length; i++) {
    try {
      fs.renameSync(from[i]!, to[i]!);
    } catch (error) {
      errors[i] = error as Error;
    }
    if (i + 1 === killAfter) process.kill(process.pid, "SIGKILL");
    if (i % RENAME_SLICE === RENAME_SLICE - 1) await new Promise((r) => setTimeout(r, 0));
  }
  return errors;
}

/**
 * Remove files (or folders), all of them on the removal helper thread in one message when it
 * runs (deleting temporaries removes thousands of small files: a promise and an I/O-pool task
 * each cost more than the unlink), else on the runtime's I/O threads. One already gone is
 * fine. Resolves with the error of each removal that failed (null for the others).
 */
export async function removeAll(paths: readonly string[]): Promise<(Error | null)[]> {
  const errors: (Error | null)[] = new Array(paths.length).fill(null);
  if (paths.length === 0) return errors;
  const ask = helperThread("remove");
  if (ask !== null) {
    const answer = await ask({ kind: "remove", paths });
    if (answer.stopped !== true) {
      for (const [i, message] of answer.failures ?? []) errors[i] = new Error(message);
      return errors;
    }
  }
  await Promise.all(paths.map(async (p, i) => {
    try {
      await fs.promises.unlink(p);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === "ENOENT") return;
      if (!FOLDER_CODES.has(code)) {
        errors[i] = error as Error;
        return;
      }
      await fs.promises.rm(p, { recursive: true, force: true }).catch((e: Error) => {
        errors[i] = e;
      });
    }
  }));
  return errors;
}

/**
 * What unlinking a folder answers: EISDIR (Linux), EPERM (macOS), ENOTEMPTY (Deno, whose unlink
 * removes an empty folder and refuses a full one). Such a path is removed as a tree.
 */
const FOLDER_CODES = new Set<string | undefined>(["EISDIR", "EPERM", "ENOTEMPTY"]);

/** Remove a file (or a folder, as a tree) on this thread; one already gone is fine. */
export function removeNow(path: string): Error | null {
  try {
    fs.unlinkSync(path);
    return null;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ENOENT") return null;
    if (!FOLDER_CODES.has(code)) return error as Error;
  }
  try {
    fs.rmSync(path, { recursive: true, force: true });
    return null;
  } catch (error) {
    return error as Error;
  }
}

/**
 * Answer the helper requests on this worker thread (workers/sync_worker.ts). A path that cannot
 * be opened is answered with the error; a failed `syncfs` with false (the caller then fsyncs its
 * files one by one).
 */
export async function serveHelperRequests(scope: {
  onmessage: ((event: MessageEvent<HelperRequest>) => void) | null;
  postMessage(message: HelperAnswer): void;
}): Promise<void> {
  // Listen at once: a request may come before the binding is loaded.
  const bound = bindBlocking();
  scope.onmessage = async (event) => {
    const request = event.data;
    if (request.kind === "rename") {
      scope.postMessage({ id: request.id, ok: true, failures: renameInOrder(request) });
      return;
    }
    if (request.kind === "remove") {
      const failures: [number, string][] = [];
      request.paths.forEach((p, i) => {
        const error = removeNow(p);
        if (error !== null) failures.push([i, error.message]);
      });
      scope.postMessage({ id: request.id, ok: true, failures });
      return;
    }
    const syncfs = await bound;
    try {
      scope.postMessage({ id: request.id, ok: syncfs !== null && syncPath(syncfs, request.path) });
    } catch (error) {
      scope.postMessage({ id: request.id, ok: false, error: (error as Error).message });
    }
  };
  await bound;
}

function renameInOrder(
  request: Extract<HelperRequest, { kind: "rename" }>,
): [number, string][] {
  const failures: [number, string][] = [];
  for (let i = 0; i < request.from.length; i++) {
    try {
      fs.renameSync(request.from[i]!, request.to[i]!);
    } catch (error) {
      failures.push([i, (error as Error).message]);
    }
    if (i + 1 === request.killAfter) process.kill(process.pid, "SIGKILL");
  }
  return failures;
}

/**
 * Write back every dirty page of the filesystem holding `path` (a file or folder), off this
 * thread; false when this runtime or platform cannot, and the caller must fsync each file.
 * Rejects when `path` cannot be opened.
 */
export async function syncFilesystem(path: string): Promise<boolean> {
  const syncfs = await load();
  return syncfs === null ? false : await syncfs(path);
}

/** fsync one file (or folder) by path. */
export function fsyncFile(path: string): void {
  const fd = fs.openSync(path, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** fsync one file (or folder) by path, on the runtime's I/O threads. */
export function fsyncFileAsync(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    fs.open(path, "r", (error, fd) => {
      if (error !== null) return reject(error);
      fs.fsync(fd, (syncError) => {
        fs.close(fd, () => (syncError === null ? resolve() : reject(syncError)));
      });
    });
  });
}

/** fsync an open descriptor on the runtime's I/O threads. */
export function fsyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fs.fsync(fd, (error) => (error === null ? resolve() : reject(error)));
  });
}
