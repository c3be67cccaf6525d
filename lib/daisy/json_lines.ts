/**
 * The daisy session's transport: one JSON object per line on stdin (from Python) and stdout (to
 * Python). Nothing else may write to this process's stdout while a session runs: the run's
 * notices, progress and summary go to stderr, which Python leaves on the user's terminal.
 */

import process from "node:process";
import { isRecord } from "../errors.ts";

export type JsonObject = Record<string, unknown>;

export interface LineChannel {
  /** Sends one message (a line); messages are written in the order sent. */
  send(message: JsonObject): void;
  /** Resolves once everything sent so far has been handed to the pipe. */
  flush(): Promise<void>;
}

/** A line that is not a JSON object: the peer broke the protocol. */
export class ProtocolViolation extends Error {}

/**
 * Reads stdin line by line, calling `onMessage` for each object, and `onEnd` once at EOF (the
 * Python process ended or closed its end: the session must end).
 */
export function readLines(
  onMessage: (message: JsonObject) => void,
  onEnd: () => void,
  input: NodeJS.ReadableStream = process.stdin,
): void {
  let pending = "";
  input.setEncoding("utf8");
  input.on("data", (chunk: string) => {
    pending += chunk;
    let newline = pending.indexOf("\n");
    while (newline >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      if (line.trim() === "") {
        // blank lines are allowed between messages
      } else {
        try {
          onMessage(parseLine(line));
        } catch (error) {
          if (!(error instanceof ProtocolViolation)) throw error;
          process.stderr.write(`${error.message}\n`);
        }
      }
      newline = pending.indexOf("\n");
    }
  });
  input.once("end", onEnd);
  input.once("close", onEnd);
}

function parseLine(line: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    throw new ProtocolViolation(
      `The daisy session received a line that is not JSON (${(error as Error).message}): ${
        line.slice(0, 200)
      }`,
    );
  }
  if (!isRecord(value)) {
    throw new ProtocolViolation(
      `The daisy session received ${line.slice(0, 200)}, not a JSON object`,
    );
  }
  return value;
}

/** Writes messages to stdout, one line each. */
export function stdoutChannel(output: NodeJS.WritableStream = process.stdout): LineChannel {
  let last: Promise<void> = Promise.resolve();
  return {
    send(message) {
      const text = JSON.stringify(message) + "\n";
      last = new Promise((resolve) => {
        output.write(text, () => resolve());
      });
    },
    flush: () => last,
  };
}
