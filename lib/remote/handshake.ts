/**
 * One connection's handshake with the worker server (`worker_server.ts`): hello (protocol, slot,
 * worker nonce) -> challenge (scheduler nonce, proof) -> auth (worker proof), all before the
 * connection is trusted with anything. Frames are capped small, and the whole handshake and its
 * first frame each have a deadline.
 */

import {
  encodeFrame,
  type FrameDecoder,
  schedulerSideDecoder,
  type SessionFrame,
} from "../execute/protocol/frames.ts";
import {
  type FromWorker,
  type HelloMessage,
  PROTOCOL_VERSION,
} from "../execute/protocol/messages.ts";
import type { TcpConnection } from "../runtime/tcp.ts";
import { isNonce, joinSlot, newNonce, sameMac, schedulerProof, workerProof } from "./auth.ts";

/** Frames before authentication are small: a hello and an auth fit easily. */
export const HANDSHAKE_FRAME_CAP = 16 * 1024;
/** A hello and an auth take a few hundred bytes: a handshake's decoder starts this small. */
const HANDSHAKE_BUFFER_BYTES = 1024;
/** A connection that sent no hello by then is dropped (it holds a handshake slot). */
export const HELLO_MS = 2_000;

export interface HandshakeEnd {
  admitted(hello: HelloMessage): void;
  /** `tell`: send the peer an error frame first (it spoke the protocol). */
  refused(why: string, tell: boolean): void;
}

/**
 * One connection's handshake: hello (protocol, slot, worker nonce) -> challenge (scheduler
 * nonce, proof) -> auth (worker proof). Any other frame, a frame over the cap, bytes that are not
 * frames, a wrong proof or the deadline passing refuses the connection.
 */
export class Handshake {
  readonly #socket: TcpConnection;
  readonly #stopWatching: () => void;
  readonly #secret: string;
  readonly #end: HandshakeEnd;
  readonly #decoder: FrameDecoder<FromWorker | SessionFrame> = schedulerSideDecoder(
    HANDSHAKE_FRAME_CAP,
    HANDSHAKE_BUFFER_BYTES,
  );
  readonly #nonce = newNonce();
  readonly #cancelDeadline: () => void;
  readonly #onData = (chunk: Uint8Array) => this.#data(chunk);
  #hello: HelloMessage | null = null;
  #done = false;

  constructor(
    socket: TcpConnection,
    secret: string,
    ms: number,
    deadline: (ms: number, expire: () => void) => () => void,
    end: HandshakeEnd,
  ) {
    this.#socket = socket;
    this.#secret = secret;
    this.#end = end;
    const whole = deadline(
      ms,
      () => this.#finish(null, `no complete handshake within ${ms / 1000} s`),
    );
    const hello = deadline(Math.min(HELLO_MS, ms), () => {
      if (this.#hello === null) this.#finish(null, `no hello within ${HELLO_MS / 1000} s`);
    });
    this.#cancelDeadline = () => {
      whole();
      hello();
    };
    this.#stopWatching = socket.onClose(() =>
      this.#finish(null, "it closed the connection during the handshake")
    );
    socket.setOnData(this.#onData);
  }

  #data(chunk: Uint8Array): void {
    if (this.#done) return;
    let messages: (FromWorker | SessionFrame)[];
    try {
      messages = this.#decoder.push(chunk);
    } catch (error) {
      this.#finish(null, `it does not speak the blockwise protocol: ${(error as Error).message}`);
      return;
    }
    messages.forEach((m, i) => {
      if (!this.#done) this.#message(m, i === messages.length - 1);
    });
  }

  #message(m: FromWorker | SessionFrame, last: boolean): void {
    if (this.#hello === null) {
      if (m.kind !== "hello") return this.#finish(null, `it sent "${m.kind}" before "hello"`, true);
      if (m.protocol !== PROTOCOL_VERSION) {
        return this.#finish(
          null,
          `it speaks protocol ${m.protocol} but this blockwise speaks ${PROTOCOL_VERSION}; run the same blockwise version on both sides`,
          true,
        );
      }
      if ((m.slot ?? m.join) === undefined || m.nonce === undefined || !isNonce(m.nonce)) {
        return this.#finish(
          null,
          `its hello has no slot and nonce; a remote worker must be started by blockwise's launcher (blockwise worker --connect, with BLOCKWISE_WORKER_SLOT set) or join by hand (--secret-file)`,
          true,
        );
      }
      this.#hello = m;
      this.#socket.write(encodeFrame({
        kind: "challenge",
        nonce: this.#nonce,
        proof: schedulerProof(this.#secret, m.nonce, this.#nonce),
      }));
      return;
    }
    if (m.kind === "error") {
      return this.#finish(null, `the worker refused this scheduler: ${m.message}`);
    }
    if (m.kind !== "auth") return this.#finish(null, `it sent "${m.kind}" instead of "auth"`, true);
    const hello = this.#hello;
    const slot = hello.slot ?? joinSlot(hello.join!);
    const expected = workerProof(this.#secret, this.#nonce, hello.nonce!, slot);
    if (!sameMac(m.mac, expected)) {
      return this.#finish(null, "wrong secret (its proof does not match this run's)", true);
    }
    // A worker sends nothing after auth until it gets init: more frames now break the protocol.
    if (!last || this.#decoder.buffered > 0) {
      return this.#finish(null, "it sent frames after auth before receiving init", true);
    }
    this.#finish(hello, "");
  }

  #finish(hello: HelloMessage | null, why: string, tell = false): void {
    if (this.#done) return;
    this.#done = true;
    this.#cancelDeadline();
    this.#socket.setOnData(null);
    this.#stopWatching();
    if (hello !== null) this.#end.admitted(hello);
    else this.#end.refused(why, tell);
  }
}
