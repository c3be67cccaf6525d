/**
 * Fingerprints of a task's declared inputs under one block's read ROI: a file by its size and
 * modification time (or, with `compare: "content"`, its SHA-256), a Zarr array by the chunk
 * files that the read ROI covers, each the same way. Content hashes are computed once per file
 * per run, however many blocks read it.
 */

import * as fs from "node:fs";
import { createHash } from "node:crypto";
import { InputError } from "../errors.ts";
import type { Block, InputConfig } from "../pipeline/spec.ts";
import {
  chunkFile,
  chunksCoveredBy,
  openArrayMetadata,
  type ZarrArrayMetadata,
} from "../zarr/mod.ts";
import type { Digest64 } from "./digest.ts";

interface OpenInput {
  readonly config: InputConfig;
  readonly meta: ZarrArrayMetadata | null;
  readonly offset: readonly number[];
}

export class InputFingerprints {
  readonly #inputs: readonly OpenInput[];
  readonly #contentHashes = new Map<string, string>();
  readonly #buffer = new Uint8Array(1 << 20);

  /** Opens every input; refuses one that does not exist, naming it and the task. */
  constructor(taskId: string, inputs: readonly InputConfig[]) {
    this.#inputs = inputs.map((config) => {
      const where = `Task "${taskId}": input ${config.written}`;
      if (config.kind === "path") {
        if (!fs.existsSync(config.target)) {
          throw new InputError(
            `${where} does not exist (${config.target}); create it, or remove it from the task's inputs.`,
          );
        }
        return { config, meta: null, offset: [] };
      }
      let meta: ZarrArrayMetadata;
      try {
        meta = openArrayMetadata(config.target);
      } catch (error) {
        throw new InputError(
          `${where} cannot be opened as a Zarr array: ${(error as Error).message}`,
        );
      }
      return {
        config,
        meta,
        offset: config.offset ?? new Array<number>(meta.shape.length).fill(0),
      };
    });
  }

  get count(): number {
    return this.#inputs.length;
  }

  /** Fold the fingerprints of every input under `block`'s read ROI into `digest`. */
  fold(block: Block, digest: Digest64): void {
    for (const input of this.#inputs) {
      if (input.meta === null) {
        this.#file(input.config.target, input.config.compare, digest);
        continue;
      }
      const box = {
        offset: block.readRoi.offset.map((o, d) => o + input.offset[d]!),
        shape: block.readRoi.shape,
      };
      for (const coords of chunksCoveredBy(input.meta, box)) {
        this.#file(
          chunkFile(input.config.target, input.meta, coords),
          input.config.compare,
          digest,
        );
      }
    }
  }

  #file(file: string, compare: "mtime" | "content", digest: Digest64): void {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(file);
    } catch {
      digest.word(0); // a missing chunk reads as the fill value: its absence is the fingerprint
      return;
    }
    if (compare === "mtime") {
      digest.integer(stat.size).integer(Math.round(stat.mtimeMs * 1000));
      return;
    }
    let hash = this.#contentHashes.get(file);
    if (hash === undefined) {
      hash = sha256File(file, this.#buffer);
      this.#contentHashes.set(file, hash);
    }
    digest.text(hash);
  }
}

export function sha256File(file: string, buffer: Uint8Array): string {
  const h = createHash("sha256");
  const fd = fs.openSync(file, "r");
  try {
    let at = 0;
    for (;;) {
      const n = fs.readSync(fd, buffer, 0, buffer.length, at);
      if (n <= 0) break;
      h.update(buffer.subarray(0, n));
      at += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return h.digest("hex");
}
