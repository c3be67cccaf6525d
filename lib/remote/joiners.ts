/**
 * Workers joining a run by hand (`blockwise worker --connect HOST:PORT --secret-file FILE`):
 * tasks with `launch: "manual"` launch nothing. The executor pool still makes their executors
 * (up to `maxWorkers`, while blocks wait), each an empty place whose launch stays "queued" with
 * no deadline; a worker that authenticates without a slot, naming its task (or none when only
 * one task takes joiners), fills the oldest empty place of that task. A full task (or one with
 * no place now: finished, or waiting for upstream) turns it away with "later": the worker exits
 * 0. The run writes its secret to a file only its owner may read, and says how to join.
 */

import * as fs from "node:fs";
import { join } from "node:path";
import type { HelloMessage } from "../execute/protocol/messages.ts";
import type { LaunchHandle } from "../execute/stream_executor.ts";
import type { LaunchConfig, PipelineConfig } from "../pipeline/spec.ts";
import { writeSecretFile } from "./auth.ts";
import type { Launcher } from "./launcher.ts";
import type { JoinAnswer, SlotClaim } from "./worker_server.ts";

/** A place waiting for a worker to join: queued until cancelled, no deadline. */
class ManualLaunch implements LaunchHandle {
  readonly label = "a place for a worker joining by hand";
  #ended = false;
  phase(): "queued" | "ended" {
    return this.#ended ? "ended" : "queued";
  }
  endReason(): string {
    return "it was cancelled";
  }
  cancel(): void {
    this.#ended = true;
  }
}

/** `launch: "manual"`: launches nothing; each "launch" is a place a joiner may fill. */
export class ManualLauncher implements Launcher {
  readonly name = "workers joining by hand";
  launch(): LaunchHandle {
    return new ManualLaunch();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
  abort(): void {}
}

interface Place {
  readonly claim: SlotClaim;
  joined: boolean;
}

/** The empty and filled places of the run's manual tasks, and who takes a joiner. */
export class Joiners {
  /** Task ids (by task index) that take joiners; null for the others. */
  readonly #ids: (string | null)[];
  readonly #maxWorkers: number[];
  readonly #python: boolean[];
  readonly #places: Place[][];

  constructor(pipeline: PipelineConfig, launches: readonly LaunchConfig[]) {
    this.#ids = pipeline.tasks.map((t, i) => launches[i]!.kind === "manual" ? t.id : null);
    this.#maxWorkers = pipeline.tasks.map((t) => t.maxWorkers);
    this.#python = pipeline.tasks.map((t) => t.kind === "python");
    this.#places = pipeline.tasks.map(() => []);
  }

  /** Ids of the tasks that take joiners, in pipeline order. */
  get taskIds(): string[] {
    return this.#ids.filter((id): id is string => id !== null);
  }

  /** An executor of task `t` waits for a joiner; returns the function that ends its place. */
  wait(t: number, claim: SlotClaim): () => void {
    const place: Place = { claim, joined: false };
    this.#places[t]!.push(place);
    return () => {
      const places = this.#places[t]!;
      const i = places.indexOf(place);
      if (i >= 0) places.splice(i, 1);
    };
  }

  /** Where an authenticated joiner goes (`WorkerServer.acceptJoiners`). */
  answer(hello: HelloMessage): JoinAnswer {
    const ids = this.taskIds;
    const list = ids.map((id) => JSON.stringify(id)).join(", ");
    const asked = hello.join ?? "";
    if (ids.length === 0) {
      return { refusal: `this run has no task workers can join (launch: "manual")`, later: false };
    }
    if (asked === "" && ids.length > 1) {
      return {
        refusal: `this run has several tasks workers can join (${list}); pass --task ID`,
        later: false,
      };
    }
    const id = asked === "" ? ids[0]! : asked;
    const t = this.#ids.indexOf(id);
    if (t < 0) {
      return {
        refusal: `task ${
          JSON.stringify(id.slice(0, 80))
        } takes no workers joining by hand; tasks that do: ${list}`,
        later: false,
      };
    }
    if (this.#python[t] !== hello.client.startsWith("blockwise-python")) {
      return {
        refusal: this.#python[t]
          ? `task "${id}" runs Python: join it with blockwise's Python client (the run printed its command)`
          : `task "${id}" is not a Python task: join it with blockwise worker`,
        later: false,
      };
    }
    const places = this.#places[t]!;
    const joined = places.filter((p) => p.joined).length;
    for (const place of places) {
      if (place.joined) continue;
      const claim: SlotClaim = (channel, h) => {
        if (!place.claim(channel, h)) return false;
        place.joined = true;
        return true;
      };
      return { claim };
    }
    const max = this.#maxWorkers[t]!;
    return {
      refusal: joined >= max
        ? `task "${id}" is full: it has its ${max} worker${
          max === 1 ? "" : "s"
        } (maxWorkers); try again later`
        : `task "${id}" has no blocks for another worker now (it is finished, or waits for blocks of upstream tasks); try again later`,
      later: true,
    };
  }
}

/** Where the run's secret is written for joiners: in the run's worker log folder. */
export function joinSecretPath(logDir: string, runId: string): string {
  return join(logDir, logDir.includes(runId) ? "secret" : `secret-${runId}`);
}

/** Write the secret (mode 0600) for joiners; returns its path. */
export function writeJoinSecret(logDir: string, runId: string, secret: string): string {
  fs.mkdirSync(logDir, { recursive: true, mode: 0o700 });
  return writeSecretFile(joinSecretPath(logDir, runId), secret);
}

/** The lines that say how to join, one per task when several take joiners. */
export function joinInstructions(
  taskIds: readonly string[],
  worker: (taskId: string) => string,
): string[] {
  if (taskIds.length === 1) return [`Workers can join: ${worker(taskIds[0]!)}`];
  return taskIds.map((id) => `Workers can join task "${id}": ${worker(id)} --task ${id}`);
}

/** An argument as a POSIX shell reads it back (quoted only when needed). */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
