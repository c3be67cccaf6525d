/**
 * Making many files durable at once, without blocking the thread that runs the scheduler. Group
 * commit of block outputs writes hundreds of small files and then needs them all on disk before
 * it records them: one `fsync` per file costs about a millisecond each, while Linux's
 * `syncfs(fd)` writes back every dirty page of one filesystem in a single call. It is reached
 * through libc, off the calling thread, so the run loop keeps dispatching and collecting results
 * while the disk works (and the next commit batch grows meanwhile):
 *   - Deno: an FFI symbol declared `nonblocking` (run on Deno's blocking-task threads),
 *   - Bun: a small worker thread (workers/sync_worker.ts) that calls it through bun:ffi.
 * Elsewhere the caller falls back to fsync per file (`fsyncFile`, also off-thread).
 */

import * as fs from "node:fs";
import process from "node:process";
import { runtimeName } from "./detect.ts";
import { denoFfiState } from "./mmap_deno.ts";
import { embeddedModuleUrl } from "./worker_spawn.ts";

type SyncFs = (fd: number) => number;
type SyncFsAsync = (path: string) => Promise<boolean>;

interface SyncRequest {
  readonly id: number;
  readonly path: string;
}

interface SyncAnswer {
  readonly id: number;
  readonly ok: boolean;
  /** Why the path could not be opened (the caller's promise rejects with it). */
  readonly error?: string;
}

interface SyncWorker {
  onmessage: ((event: MessageEvent<SyncAnswer>) => void) | null;
  onerror: ((event: unknown) => void) | null;
  postMessage(message: SyncRequest): void;
  unref?: () => void;
}

let binding: Promise<SyncFsAsync | null> | null = null;

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
  return onWorker() ?? ((path) => Promise.resolve(syncPath(blocking, path)));
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

/** `syncfs` on a worker thread that does nothing else (Bun), or null when it cannot start. */
function onWorker(): SyncFsAsync | null {
  if (typeof Worker === "undefined") return null;
  let worker: SyncWorker;
  try {
    worker = new Worker(embeddedModuleUrl("workers/sync_worker.ts").href, {
      type: "module",
      name: "syncfs",
    }) as unknown as SyncWorker;
  } catch {
    return null;
  }
  // It must not keep the process alive: callers await what they asked for.
  worker.unref?.();
  const waiting = new Map<number, (answer: SyncAnswer) => void>();
  let broken = false;
  let next = 0;
  worker.onmessage = (event) => {
    const answer = event.data;
    waiting.get(answer.id)?.(answer);
    waiting.delete(answer.id);
  };
  worker.onerror = () => {
    // Callers fall back to fsync per file.
    broken = true;
    for (const [id, settle] of waiting) settle({ id, ok: false });
    waiting.clear();
  };
  return (path) => {
    if (broken) return Promise.resolve(false);
    return new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, (answer) => {
        if (answer.error === undefined) resolve(answer.ok);
        else reject(new Error(answer.error));
      });
      worker.postMessage({ id, path });
    });
  };
}

/**
 * Answer `syncfs` requests on this worker thread (workers/sync_worker.ts). A path that cannot be
 * opened is answered with the error; a failed `syncfs` with false (the caller then fsyncs its
 * files one by one).
 */
export async function serveSyncRequests(scope: {
  onmessage: ((event: MessageEvent<SyncRequest>) => void) | null;
  postMessage(message: SyncAnswer): void;
}): Promise<void> {
  // Listen at once: a request may come before the binding is loaded.
  const bound = bindBlocking();
  scope.onmessage = async (event) => {
    const { id, path } = event.data;
    const syncfs = await bound;
    try {
      scope.postMessage({ id, ok: syncfs !== null && syncPath(syncfs, path) });
    } catch (error) {
      scope.postMessage({ id, ok: false, error: (error as Error).message });
    }
  };
  await bound;
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
