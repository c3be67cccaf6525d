/**
 * The shared-memory fast path of a Web Worker: a small Float64Array in a SharedArrayBuffer that
 * the worker writes between blocks and the run loop reads without a message. It says which block
 * runs now (so a timeout or a crash is pinned on the right block) and carries the recall and stop
 * flags, which a worker busy in a synchronous batch could not receive as messages until the batch
 * ends. Byte-stream workers carry the same facts as `heartbeat` and `recall` messages.
 */

export const STATUS_SLOTS = 6;

export const enum StatusSlot {
  /** 1 while a block runs, 0 otherwise. */
  Running = 0,
  /** Position of the running (or last) block. */
  Position = 1,
  /** Blocks started so far: a change means a new block started, even at the same position. */
  Started = 2,
  /** Blocks finished so far. */
  Finished = 3,
  /** Set to 1 by the run loop: hand back every block not started yet; the worker resets it. */
  Recall = 4,
  /** Set to 1 by the run loop when the run stops; never reset: nothing new is started. */
  Stop = 5,
}
