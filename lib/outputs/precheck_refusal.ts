/**
 * A block that cannot run in this run (an input it needs is gone and nothing in this run
 * brings it back): it fails for good, without retries, with this message. Outputs' pre-check
 * returns it; the run loop (lib/execute/block_source.ts, which re-exports it) fails the block.
 */
export interface PrecheckRefusal {
  readonly refuse: string;
}
