/**
 * The worker thread that makes filesystems durable (`syncfs`) for the scheduler's thread, so a
 * group commit's wait for the disk never stops the run loop (lib/runtime/fs_sync.ts).
 */

import { serveSyncRequests } from "../lib/runtime/fs_sync.ts";

await serveSyncRequests(
  globalThis as unknown as Parameters<typeof serveSyncRequests>[0],
);
