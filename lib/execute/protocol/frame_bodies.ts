/**
 * A frame's body decoded from the bytes it arrived in: binary for the hot messages (blocks,
 * results, returned, heartbeat, recall, stop), UTF-8 JSON for the others. Validation of the
 * decoded value is `messages.ts`'s; framing and buffering are `frames.ts`'s.
 */

import { FrameType, KIND_OF_JSON_TYPE } from "./frame_types.ts";
import { PROTOCOL_VERSION, ProtocolError } from "./messages.ts";

const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Decode the value of a frame of `type` whose body is the `length` bytes of `bytes` (seen also
 * through `view`) from `at`; validation is the caller's. It reads in place and keeps no view of
 * `bytes` in what it returns, so a decoder can reuse its buffer: a copy of each body, and a
 * `DataView` over that copy's fresh `ArrayBuffer`, were a fifth of a busy scheduler's time.
 */
export function decodeBody(
  type: number,
  bytes: Uint8Array,
  view: DataView,
  at: number,
  length: number,
): Record<string, unknown> {
  switch (type) {
    case FrameType.Blocks:
      return decodeBlocks(view, at, length);
    case FrameType.Results:
      return decodeResults(bytes, view, at, length);
    case FrameType.Returned: {
      needBytes(length, 4, "A returned");
      const n = view.getUint32(at, true);
      needBytes(length, 4 + 8 * n, "A returned");
      const positions = new Float64Array(n);
      for (let i = 0; i < n; i++) positions[i] = view.getFloat64(at + 4 + 8 * i, true);
      return { kind: "returned", count: n, positions };
    }
    case FrameType.Heartbeat:
      needBytes(length, 16, "A heartbeat");
      return {
        kind: "heartbeat",
        running: view.getFloat64(at, true),
        runningFor: view.getFloat64(at + 8, true),
      };
    case FrameType.Recall:
      needBytes(length, 1, "A recall");
      return { kind: "recall", final: bytes[at] === 1 };
    case FrameType.Stop:
      return { kind: "stop" };
    default: {
      const kind = KIND_OF_JSON_TYPE.get(type);
      if (kind === undefined) {
        throw new ProtocolError(
          `Unknown frame type 0x${
            type.toString(16).padStart(2, "0")
          }; the peer does not speak blockwise protocol ${PROTOCOL_VERSION}`,
        );
      }
      const value = parseJson(bytes.subarray(at, at + length), kind);
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        throw new ProtocolError(`A ${kind} frame's body is not a JSON object`);
      }
      return { ...(value as Record<string, unknown>), kind };
    }
  }
}

/** A blocks frame's body: the worker's hot path, apart for the JIT as `decodeResults` is. */
function decodeBlocks(view: DataView, at: number, length: number): Record<string, unknown> {
  needBytes(length, 4, "A blocks");
  const n = view.getUint32(at, true);
  needBytes(length, 4 + 16 * n, "A blocks");
  const blocks = new Float64Array(2 * n);
  for (let i = 0; i < 2 * n; i++) blocks[i] = view.getFloat64(at + 4 + 8 * i, true);
  return { kind: "blocks", count: n, blocks };
}

/**
 * A results frame's body: the hot path of a busy run, in a function of its own so that the JIT
 * compiles it once, whatever mix of other frames (a thousand handshakes) goes through
 * `decodeBody` around it.
 */
function decodeResults(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  length: number,
): Record<string, unknown> {
  needBytes(length, 16, "A results");
  const n = view.getUint32(at, true);
  const stride = view.getUint32(at + 4, true);
  const values = n * stride;
  needBytes(length, 16 + 8 * values, "A results");
  const records = new Float64Array(values);
  for (let i = 0; i < values; i++) records[i] = view.getFloat64(at + 16 + 8 * i, true);
  const tail = 16 + 8 * values;
  const extra = tail === length ? [] : parseJson(bytes.subarray(at + tail, at + length), "results");
  const message: Record<string, unknown> = {
    kind: "results",
    count: n,
    stride,
    cpuSeconds: view.getFloat64(at + 8, true),
    records,
    errors: extra,
  };
  if (typeof extra === "object" && extra !== null && !Array.isArray(extra)) {
    delete message["errors"];
    Object.assign(message, extra);
  }
  return message;
}

function needBytes(length: number, size: number, what: string): void {
  if (length < size) {
    throw new ProtocolError(
      `${what} frame is ${length} bytes, too short for its content (${size} bytes)`,
    );
  }
}

function parseJson(bytes: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch (error) {
    throw new ProtocolError(
      `A ${what} frame's body is not valid UTF-8 JSON: ${(error as Error).message}`,
    );
  }
}
