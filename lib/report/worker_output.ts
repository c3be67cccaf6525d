/**
 * Output that user code prints in a worker or a command: split into lines, each prefixed with
 * `[<task>:w<worker>] `, stdout to stdout and stderr to stderr. A partial line waits for its
 * newline per worker and stream (two workers never share a line), and is printed as a line of
 * its own when the run ends. With a log directory, output is appended unprefixed to
 * `<logDir>/<task>/worker_<id>.out` / `.err` instead; if those cannot be written, it is printed
 * after a warning.
 */

import * as fs from "node:fs";
import { join } from "node:path";
import { paint } from "./progress_format.ts";

export type OutputStream = "stdout" | "stderr";

/** Where prefixed lines go: the console decides (above the bars, or straight to the stream). */
export interface OutputSinks {
  /** Whole lines for `stream`. */
  print(stream: OutputStream, lines: string): void;
  /** A message for the user (announcement, warning), one or more whole lines. */
  notice(message: string): void;
  /** Whether the prefix of `stream` may be coloured. */
  color(stream: OutputStream): boolean;
}

/** Writes worker output to `<logDir>/<task>/worker_<id>.out|.err`, keeping the files open. */
class WorkerLogFiles {
  readonly #files = new Map<string, number>();
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  write(taskId: string, workerId: number, stream: OutputStream, text: string): void {
    const path = join(
      this.dir,
      taskId,
      `worker_${workerId}.${stream === "stdout" ? "out" : "err"}`,
    );
    let fd = this.#files.get(path);
    if (fd === undefined) {
      fs.mkdirSync(join(this.dir, taskId), { recursive: true });
      fd = fs.openSync(path, "a");
      this.#files.set(path, fd);
    }
    const bytes = new TextEncoder().encode(text);
    let offset = 0;
    while (offset < bytes.length) offset += fs.writeSync(fd, bytes, offset, bytes.length - offset);
  }

  close(): void {
    for (const fd of this.#files.values()) {
      try {
        fs.closeSync(fd);
      } catch {
        // Already closed; everything was written synchronously.
      }
    }
    this.#files.clear();
  }
}

interface PartialLine {
  readonly prefix: string;
  readonly stream: OutputStream;
  text: string;
}

export class WorkerOutput {
  readonly #sinks: OutputSinks;
  #logFiles: WorkerLogFiles | null;
  #announced = false;
  #ended = false;
  readonly #partial = new Map<string, PartialLine>();

  constructor(logDir: string | null, sinks: OutputSinks) {
    this.#sinks = sinks;
    this.#logFiles = logDir === null ? null : new WorkerLogFiles(logDir);
  }

  write(taskId: string, workerId: number, stream: OutputStream, text: string): void {
    if (text === "") return;
    const files = this.#logFiles;
    if (files !== null && this.#writeLog(files, taskId, workerId, stream, text)) return;
    const key = `${taskId}\u0000${workerId}\u0000${stream}`;
    let entry = this.#partial.get(key);
    if (entry === undefined) {
      entry = { prefix: `[${taskId}:w${workerId}] `, stream, text: "" };
      this.#partial.set(key, entry);
    }
    const lines = (entry.text + text).split("\n");
    entry.text = lines.pop() ?? "";
    if (this.#ended && entry.text !== "") {
      lines.push(entry.text);
      entry.text = "";
    }
    if (lines.length > 0) this.#print(entry, lines);
  }

  /** Print every partial line as a line of its own; later output is printed at once. */
  end(): void {
    this.#ended = true;
    for (const entry of this.#partial.values()) {
      if (entry.text === "") continue;
      const text = entry.text;
      entry.text = "";
      this.#print(entry, [text]);
    }
    this.#logFiles?.close();
  }

  #print(entry: PartialLine, lines: readonly string[]): void {
    const prefix = paint(entry.prefix, "dim", this.#sinks.color(entry.stream));
    this.#sinks.print(
      entry.stream,
      lines.map((l) => `${prefix}${l.endsWith("\r") ? l.slice(0, -1) : l}\n`).join(""),
    );
  }

  /** False when the log files cannot be written: output is printed from then on. */
  #writeLog(
    files: WorkerLogFiles,
    taskId: string,
    workerId: number,
    stream: OutputStream,
    text: string,
  ): boolean {
    try {
      if (!this.#announced) {
        this.#announced = true;
        this.#sinks.notice(
          `Worker output goes to ${join(files.dir, "<task>", "worker_<id>.out")} and .err`,
        );
      }
      files.write(taskId, workerId, stream, text);
      return true;
    } catch (error) {
      this.#sinks.notice(
        `warning: cannot write worker logs under "${files.dir}": ${
          error instanceof Error ? error.message : String(error)
        }; printing worker output instead.`,
      );
      files.close();
      this.#logFiles = null;
      return false;
    }
  }
}
