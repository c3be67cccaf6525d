/**
 * The worker protocol on a byte stream (a pipe to a child process, a TCP connection): each
 * message is one frame, `u32 length (little-endian) | u8 type | body`, where `length` counts the
 * type byte and the body. Control messages carry a UTF-8 JSON body; the hot ones (blocks,
 * results, returned, heartbeat) are binary, little-endian. The layout is specified in
 * docs/design/WORKERS.md for implementations in other languages.
 *
 * A decoder refuses a frame longer than its cap before buffering it, an unknown type, and a body
 * that does not match its type, with a ProtocolError that says which.
 */

import {
  type FromWorker,
  parseFromWorker,
  parseToWorker,
  ProtocolError,
  type ResultsMessage,
  type ToWorker,
} from "./messages.ts";
import { decodeBody } from "./frame_bodies.ts";
import { DEFAULT_FRAME_CAP, FRAME_HEADER_BYTES, FrameType, JSON_TYPES } from "./frame_types.ts";

export { DEFAULT_FRAME_CAP, FRAME_HEADER_BYTES } from "./frame_types.ts";

/** Frames that are not worker messages: the handshake and a last word before closing. */
export type SessionFrame =
  | { readonly kind: "challenge"; readonly nonce: string; readonly proof: string }
  | { readonly kind: "auth"; readonly mac: string }
  | {
    readonly kind: "error";
    readonly message: string;
    /** The scheduler is busy (too many connections in their handshake): connect again later. */
    readonly retry?: boolean;
    /**
     * The run needs no more workers (a worker joining by hand whose task is full or finished):
     * not a failure, the worker exits 0; it may join again later.
     */
    readonly later?: boolean;
  };

const encoder = new TextEncoder();

function frame(type: FrameType, bodyBytes: number): { bytes: Uint8Array; view: DataView } {
  // The ArrayBuffer first: `.buffer` of a small typed array made on its own costs the runtime a
  // conversion (Bun: 11 % of a scheduler feeding 2,000 workers).
  const buffer = new ArrayBuffer(FRAME_HEADER_BYTES + bodyBytes);
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  view.setUint32(0, 1 + bodyBytes, true);
  bytes[4] = type;
  return { bytes, view };
}

function jsonFrame(type: FrameType, value: Record<string, unknown>): Uint8Array {
  const { kind: _kind, ...rest } = value;
  const body = encoder.encode(JSON.stringify(rest));
  const { bytes } = frame(type, body.length);
  bytes.set(body, FRAME_HEADER_BYTES);
  return bytes;
}

/**
 * The two frames a busy run is made of, each in a function of its own so that the JIT compiles
 * it once: inlined into `encodeFrame`, they were compiled again whenever a new kind of message
 * (a thousand workers' init, stop or recall frames) went through it. The scheduler sends its
 * blocks frames through `encodeBlocks` directly, never through `encodeFrame`'s switch.
 */
export function encodeBlocks(blocks: Float64Array, n: number): Uint8Array {
  const h = FRAME_HEADER_BYTES;
  const { bytes, view } = frame(FrameType.Blocks, 4 + 16 * n);
  view.setUint32(h, n, true);
  for (let i = 0; i < 2 * n; i++) view.setFloat64(h + 4 + 8 * i, blocks[i]!, true);
  return bytes;
}

function encodeResults(message: ResultsMessage): Uint8Array {
  const h = FRAME_HEADER_BYTES;
  const values = message.count * message.stride;
  // The tail: nothing, the errors array, or {errors, commits} when outputs were staged.
  const errors = message.commits !== undefined
    ? encoder.encode(JSON.stringify({ errors: message.errors, commits: message.commits }))
    : message.errors.length === 0
    ? new Uint8Array(0)
    : encoder.encode(JSON.stringify(message.errors));
  const { bytes, view } = frame(FrameType.Results, 16 + 8 * values + errors.length);
  view.setUint32(h, message.count, true);
  view.setUint32(h + 4, message.stride, true);
  view.setFloat64(h + 8, message.cpuSeconds, true);
  for (let i = 0; i < values; i++) {
    view.setFloat64(h + 16 + 8 * i, message.records[i]!, true);
  }
  bytes.set(errors, h + 16 + 8 * values);
  return bytes;
}

/** Encode one message (or a session frame) as a frame. */
export function encodeFrame(message: ToWorker | FromWorker | SessionFrame): Uint8Array {
  const h = FRAME_HEADER_BYTES;
  switch (message.kind) {
    case "blocks":
      return encodeBlocks(message.blocks, message.count);
    case "results":
      return encodeResults(message);
    case "returned": {
      const n = message.count;
      const { bytes, view } = frame(FrameType.Returned, 4 + 8 * n);
      view.setUint32(h, n, true);
      for (let i = 0; i < n; i++) view.setFloat64(h + 4 + 8 * i, message.positions[i]!, true);
      return bytes;
    }
    case "heartbeat": {
      const { bytes, view } = frame(FrameType.Heartbeat, 16);
      view.setFloat64(h, message.running, true);
      view.setFloat64(h + 8, message.runningFor, true);
      return bytes;
    }
    case "recall": {
      const { bytes } = frame(FrameType.Recall, 1);
      bytes[h] = message.final ? 1 : 0;
      return bytes;
    }
    case "stop":
      return frame(FrameType.Stop, 0).bytes;
    default: {
      const type = JSON_TYPES[message.kind];
      if (type === undefined) throw new TypeError(`No frame type for "${message.kind}"`);
      return jsonFrame(type, message as unknown as Record<string, unknown>);
    }
  }
}

function parseSession(value: Record<string, unknown>): SessionFrame | null {
  const kind = value["kind"];
  const text = (key: string): string => {
    const v = value[key];
    if (typeof v !== "string") {
      throw new ProtocolError(`A ${String(kind)} frame needs a string "${key}"`);
    }
    return v;
  };
  if (kind === "challenge") return { kind, nonce: text("nonce"), proof: text("proof") };
  if (kind === "auth") return { kind, mac: text("mac") };
  if (kind === "error") {
    return {
      kind,
      message: text("message"),
      ...(value["retry"] === true ? { retry: true } : {}),
      ...(value["later"] === true ? { later: true } : {}),
    };
  }
  return null;
}

/** A decoder's buffer before a frame is cut (`FrameDecoder`): nothing is allocated. */
const NO_BUFFER = new Uint8Array(0);
const NO_VIEW = new DataView(NO_BUFFER.buffer);

/**
 * Splits a byte stream into frames. `push` returns the frames completed by a chunk; a frame
 * announced longer than `cap` is refused before its body arrives.
 */
export class FrameDecoder<T> {
  #buffer: Uint8Array;
  /** A view of all of `#buffer`, made with it. */
  #view: DataView;
  #start = 0;
  #end = 0;
  readonly #cap: number;
  readonly #initialBytes: number;
  readonly #parse: (value: Record<string, unknown>) => T;

  /**
   * `initialBytes`: the buffer a frame cut by a chunk's end starts with (it doubles as frames
   * need). The scheduler starts a handshake at 1 KiB and a connected worker's session at
   * 16 KiB. No buffer is allocated until a frame is cut: with thousands of workers connecting,
   * allocating and zeroing one per decoder up front was 7 % of the scheduler's extra time.
   */
  constructor(
    parse: (value: Record<string, unknown>) => T,
    cap = DEFAULT_FRAME_CAP,
    initialBytes = 64 * 1024,
  ) {
    this.#parse = parse;
    this.#cap = cap;
    this.#initialBytes = initialBytes;
    this.#buffer = NO_BUFFER;
    this.#view = NO_VIEW;
  }

  /** Bytes received that do not yet make a whole frame. */
  get buffered(): number {
    return this.#end - this.#start;
  }

  /** Bytes the decoder holds for frames cut by a chunk's end (its buffer's size). */
  get capacity(): number {
    return this.#buffer.length;
  }

  /**
   * The messages of the whole frames received so far. A chunk larger than the buffer's room is
   * read in place, and only a frame cut by its end is copied into the buffer, so the buffer
   * holds at most one frame beyond its starting size. Appending every chunk first made each connection's buffer grow to twice
   * the largest read (64 KiB and more), kept for the connection's life: 270 KB a worker with
   * 2,000 workers on fast blocks.
   */
  push(chunk: Uint8Array): T[] {
    const out: T[] = [];
    if (chunk.length <= this.#buffer.length - (this.#end - this.#start)) {
      // A chunk that fits (most are a frame or two) is copied and read from the buffer: cheaper
      // than a view of its own, and the buffer does not grow.
      this.#append(chunk);
      this.#start = this.#frames(this.#buffer, this.#view, this.#start, this.#end, out);
      if (this.#start === this.#end) this.#emptied();
      return out;
    }
    let at = 0;
    if (this.#end > this.#start) {
      at = this.#completePending(chunk, out);
      if (this.#end > this.#start) return out; // the chunk ended inside the frame
    }
    if (at < chunk.length) {
      const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      at = this.#frames(chunk, view, at, chunk.length, out);
      if (at < chunk.length) this.#append(chunk.subarray(at));
    }
    return out;
  }

  /** Read the whole frames of `bytes[at, end)`; returns where the first incomplete one starts. */
  #frames(bytes: Uint8Array, view: DataView, from: number, end: number, out: T[]): number {
    let at = from;
    while (end - at >= 4) {
      const length = this.#frameLength(view, at);
      if (end - at < 4 + length) break;
      const type = bytes[at + 4]!;
      out.push(this.#parse(decodeBody(type, bytes, view, at + FRAME_HEADER_BYTES, length - 1)));
      at += 4 + length;
    }
    return at;
  }

  /** A frame's length field, refused when it is zero or over the cap (before its body comes). */
  #frameLength(view: DataView, at: number): number {
    const length = view.getUint32(at, true);
    if (length === 0) throw new ProtocolError("A frame of length 0 has no type byte");
    if (length > this.#cap) {
      throw new ProtocolError(`A frame of ${length} bytes exceeds the cap of ${this.#cap} bytes`);
    }
    return length;
  }

  /**
   * Copy from `chunk` what the buffered frame lacks (its length field first), and read it when
   * whole; returns how many bytes of `chunk` it took.
   */
  #completePending(chunk: Uint8Array, out: T[]): number {
    let taken = 0;
    const live = this.#end - this.#start;
    if (live < 4) {
      taken = Math.min(4 - live, chunk.length);
      this.#append(chunk.subarray(0, taken));
      if (this.#end - this.#start < 4) return taken;
    }
    const whole = 4 + this.#frameLength(this.#view, this.#start);
    const more = Math.min(whole - (this.#end - this.#start), chunk.length - taken);
    this.#append(chunk.subarray(taken, taken + more));
    taken += more;
    if (this.#end - this.#start === whole) {
      this.#frames(this.#buffer, this.#view, this.#start, this.#end, out);
      this.#emptied();
    }
    return taken;
  }

  /** Everything buffered was read: start over, without the room a large frame needed. */
  #emptied(): void {
    this.#start = this.#end = 0;
    if (this.#buffer.length > 4 * this.#initialBytes) {
      this.#buffer = NO_BUFFER;
      this.#view = NO_VIEW;
    }
  }

  #append(bytes: Uint8Array): void {
    if (this.#end + bytes.length > this.#buffer.length) {
      const live = this.#end - this.#start;
      if (live + bytes.length > this.#buffer.length) {
        const size = Math.max(this.#initialBytes, 2 * (live + bytes.length));
        const next = new Uint8Array(new ArrayBuffer(size));
        next.set(this.#buffer.subarray(this.#start, this.#end), 0);
        this.#buffer = next;
        this.#view = new DataView(next.buffer);
      } else {
        this.#buffer.copyWithin(0, this.#start, this.#end);
      }
      this.#start = 0;
      this.#end = live;
    }
    this.#buffer.set(bytes, this.#end);
    this.#end += bytes.length;
  }
}

type SchedulerSide = FrameDecoder<FromWorker | SessionFrame>;
type WorkerSide = FrameDecoder<ToWorker | SessionFrame>;
const fromWorkerSide = (value: Record<string, unknown>): FromWorker | SessionFrame =>
  parseSession(value) ?? parseFromWorker(value);
const fromSchedulerSide = (value: Record<string, unknown>): ToWorker | SessionFrame =>
  parseSession(value) ?? parseToWorker(value);

/** What the scheduler side reads: worker messages, or the session frames of the handshake. */
export function schedulerSideDecoder(cap?: number, initialBytes?: number): SchedulerSide {
  return new FrameDecoder(fromWorkerSide, cap, initialBytes);
}

/** What the worker side reads: scheduler messages, or the session frames of the handshake. */
export function workerSideDecoder(cap?: number, initialBytes?: number): WorkerSide {
  return new FrameDecoder(fromSchedulerSide, cap, initialBytes);
}
