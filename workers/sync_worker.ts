/**
 * A file helper thread: makes filesystems durable (`syncfs`), renames a commit's files into
 * place, or removes files, for the scheduler's thread, so waits for the disk never stop the run
 * loop (lib/runtime/fs_sync.ts).
 */

import { serveHelperRequests } from "../lib/runtime/fs_sync.ts";

await serveHelperRequests(
  globalThis as unknown as Parameters<typeof serveHelperRequests>[0],
);
