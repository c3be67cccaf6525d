/**
 * `blockwise daisy-session`: the engine behind the Python package's daisy API
 * (docs/design/DAISY_API.md). One JSON object per line on stdin and stdout: requests from
 * Python with an `id`, answers with `re`, and events of a run in progress with `ev`. The session
 * lives as long as its stdin: at EOF a run in progress is stopped and the process exits.
 */

import process from "node:process";
import { InputError, StoreError } from "../errors.ts";
import { VERSION } from "../version.ts";
import { type JsonObject, readLines, stdoutChannel } from "../daisy/json_lines.ts";
import { parseDaisyPipeline, SessionRefusal } from "../daisy/pipeline_json.ts";
import { SchedulerHandle } from "../daisy/scheduler_handle.ts";
import { runForSession, type RunInProgress } from "./daisy_run.ts";

/** The session protocol's version; Python refuses a binary that speaks another one. */
export const DAISY_PROTOCOL = 1;

type PythonErrorType = "ValueError" | "TypeError" | "KeyError" | "RuntimeError";

function errorJson(error: unknown): { type: PythonErrorType; message: string } {
  if (error instanceof SessionRefusal) return { type: error.pythonType, message: error.message };
  if (error instanceof InputError || error instanceof StoreError) {
    return { type: "ValueError", message: error.message };
  }
  if (error instanceof Error) {
    return {
      type: "RuntimeError",
      message: `Internal error in blockwise's daisy session: ${error.message}\n${
        error.stack ?? ""
      }`,
    };
  }
  return { type: "RuntimeError", message: `Internal error: ${String(error)}` };
}

export function daisySessionCommand(): Promise<number> {
  const channel = stdoutChannel();
  // Python gone: writes fail with EPIPE, which must not crash the run that is being stopped.
  process.stdout.on("error", () => {});
  const handles = new Map<number, SchedulerHandle>();
  let nextHandle = 1;
  let run: RunInProgress | null = null;
  let running = false;
  let inputEnded = false;
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => (finish = resolve));

  const reply = (id: unknown, body: JsonObject) => channel.send({ re: id, ...body });
  const refuse = (id: unknown, error: unknown) => channel.send({ re: id, error: errorJson(error) });
  const handleOf = (m: JsonObject): SchedulerHandle => {
    const handle = handles.get(m["handle"] as number);
    if (handle === undefined) {
      throw new SessionRefusal(
        "ValueError",
        `No open scheduler ${JSON.stringify(m["handle"])} in this session (it was closed)`,
      );
    }
    return handle;
  };
  const noChecks = (): Promise<boolean> => Promise.resolve(false);

  const answer = (m: JsonObject): JsonObject | null => {
    switch (m["op"]) {
      case "hello":
        return { version: VERSION, protocol: DAISY_PROTOCOL };
      case "open": {
        const parsed = parseDaisyPipeline(m["pipeline"], noChecks);
        const handle = nextHandle++;
        const scheduler = new SchedulerHandle(parsed.config);
        handles.set(handle, scheduler);
        return { handle, tasks: scheduler.describe() };
      }
      case "acquire":
        return { block: handleOf(m).acquire(m["task"] as string) };
      case "release":
        handleOf(m).release(m["task"] as string, m["position"], m["status"]);
        return {};
      case "states":
        return { states: handleOf(m).states() };
      case "upstream":
      case "downstream":
        return { blocks: handleOf(m).neighbours(m["op"], m["task"] as string, m["writeRoi"]) };
      case "blocks":
        return { blocks: handleOf(m).blocks(m["task"] as string, m["which"], m["roi"]) };
      case "close":
        handles.delete(m["handle"] as number);
        return {};
      default:
        throw new SessionRefusal(
          "ValueError",
          `Unknown request ${
            JSON.stringify(m["op"])
          }: this blockwise ${VERSION} speaks the daisy session protocol ${DAISY_PROTOCOL}; install the blockwise wheel and binary of one version`,
        );
    }
  };

  const startRun = (m: JsonObject) => {
    if (running) {
      refuse(
        m["id"],
        new SessionRefusal(
          "ValueError",
          "A run is already in progress in this session; run_blockwise calls of one process run one after the other",
        ),
      );
      return;
    }
    running = true;
    runForSession(m, channel, (r) => (run = r))
      .then((body) => reply(m["id"], body), (error) => refuse(m["id"], error))
      .finally(() => {
        running = false;
        if (inputEnded) void channel.flush().then(() => finish(0));
      });
  };

  const onMessage = (m: JsonObject) => {
    switch (m["op"]) {
      case "run":
        return startRun(m);
      case "stop":
        return run?.stop("Stopping: Python received KeyboardInterrupt");
      case "exited":
        return run?.exited(
          String(m["task"]),
          Number(m["worker"]),
          m["ok"] === true,
          typeof m["error"] === "string" ? m["error"] : null,
        );
      case "checked":
        return run?.checked(Number(m["q"]), m["done"] === true);
      case "ran": {
        const error = m["error"] as { message?: unknown; stack?: unknown } | null | undefined;
        const failure = m["ok"] === true ? null : {
          message: typeof error?.message === "string" ? error.message : "the block failed",
          ...(typeof error?.stack === "string" ? { stack: error.stack } : {}),
        };
        return run?.ran(Number(m["q"]), failure, m["stop"] === true);
      }
    }
    try {
      const body = answer(m);
      if (body !== null) reply(m["id"], body);
    } catch (error) {
      refuse(m["id"], error);
    }
  };

  readLines(
    onMessage,
    () => {
      if (inputEnded) return;
      inputEnded = true;
      if (running) run?.peerGone();
      else void channel.flush().then(() => finish(0));
    },
  );
  return finished;
}
