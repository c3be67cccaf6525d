/**
 * The frame layout's constants shared by the encoder (`frames.ts`) and the body decoder
 * (`frame_bodies.ts`): the header size, the type byte of each message, and which messages carry
 * a JSON body. The layout is specified in docs/design/WORKERS.md.
 */

export const FRAME_HEADER_BYTES = 5;
/** Default cap on one frame (type byte and body). */
export const DEFAULT_FRAME_CAP = 16 * 1024 * 1024;

export const enum FrameType {
  Hello = 0x01,
  Challenge = 0x02,
  Auth = 0x03,
  Error = 0x0f,
  Init = 0x10,
  Ready = 0x11,
  SetupFailed = 0x12,
  Blocks = 0x20,
  Results = 0x21,
  Returned = 0x22,
  Output = 0x23,
  Closing = 0x24,
  Heartbeat = 0x25,
  Leaving = 0x26,
  Recall = 0x30,
  Stop = 0x31,
}

export const JSON_TYPES: Readonly<Record<string, FrameType>> = {
  hello: FrameType.Hello,
  challenge: FrameType.Challenge,
  auth: FrameType.Auth,
  error: FrameType.Error,
  init: FrameType.Init,
  ready: FrameType.Ready,
  "setup-failed": FrameType.SetupFailed,
  output: FrameType.Output,
  closing: FrameType.Closing,
  leaving: FrameType.Leaving,
};

export const KIND_OF_JSON_TYPE = new Map<number, string>(
  Object.entries(JSON_TYPES).map(([kind, type]) => [type, kind]),
);
