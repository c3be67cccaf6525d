/**
 * Writing command output: large outputs (`plan --blocks` of a million blocks) go out in chunks
 * with backpressure, and a closed pipe (`blockwise plan --blocks | head`) ends quietly.
 */

import process from "node:process";

export class OutputClosed extends Error {
  override readonly name = "OutputClosed";
}

export class LineWriter {
  #buffer: string[] = [];
  #size = 0;
  #closed = false;

  readonly #stream: NodeJS.WritableStream;
  readonly #chunkChars: number;

  constructor(stream: NodeJS.WritableStream = process.stdout, chunkChars = 1 << 16) {
    this.#stream = stream;
    this.#chunkChars = chunkChars;
    // Any write error (EPIPE from `| head`, a full disk) ends the output; the command then
    // stops quietly instead of producing the rest for nobody.
    stream.on("error", () => {
      this.#closed = true;
    });
  }

  async line(text: string): Promise<void> {
    this.#buffer.push(text);
    this.#size += text.length + 1;
    if (this.#size >= this.#chunkChars) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.#closed) throw new OutputClosed("output closed");
    if (this.#buffer.length === 0) return;
    const chunk = this.#buffer.join("\n") + "\n";
    this.#buffer = [];
    this.#size = 0;
    const stream = this.#stream;
    if (!stream.write(chunk)) {
      // Bun reports a closed pipe as an "error" event and never drains: wake on either.
      await new Promise<void>((resolve) => {
        const done = () => {
          stream.off("drain", done);
          stream.off("close", done);
          stream.off("error", done);
          resolve();
        };
        stream.on("drain", done);
        stream.on("close", done);
        stream.on("error", done);
      });
    }
    if (this.#closed) throw new OutputClosed("output closed");
  }
}
