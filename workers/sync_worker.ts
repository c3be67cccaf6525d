/**
 * The file helper thread: makes filesystems durable (`syncfs`) and renames a commit's files
 * into place for the scheduler's thread, so a group commit's waits for the disk never stop the
 * run loop (lib/runtime/fs_sync.ts).
 */

import { serveHelperRequests } from "../lib/runtime/fs_sync.ts";

await serveHelperRequests(
  globalThis as unknown as Parameters<typeof serveHelperRequests>[0],
);
