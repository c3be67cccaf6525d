/**
 * `blockwise run --serve [HOST:PORT]`: the dashboard of the run in flight, served by the run
 * itself (lib/view/server.ts on the tracking dir) with what only the run knows added as
 * `ReportData.live`: the progress counters of `--events`, the blocks running now and on which
 * worker, queued and connected workers.
 *
 * Cost: one mark per block finished. The counters are kept from the progress calls the console
 * gets anyway; the blocks running now are read from the executors only when the server builds a
 * document, which its refresh rule (snapshots.ts) bounds to about one a second while a page is
 * open and none when no page is. The map of each store the run holds is kept live
 * (lib/view/live_map.ts): a block the run finishes marks its cell of the map, and a frame counts
 * only the marked cells again, so a frame of a 10^8-block store does not read the whole ledger
 * (one pass at the first frame). Not for a temporary task (its outputs are deleted without a
 * word to observers), and not once the run has finished (commits may still settle then): those
 * frames read the stores as `serve` does.
 *
 * When the run ends the page should see it: if a page was polling in the last 5 s, closing
 * waits (at most 3 s) until the server has built one document that says `finished`.
 */

import process from "node:process";
import { InputError } from "../errors.ts";
import type { RunObserver, TaskResult } from "../run/run_types.ts";
import type { TaskRuntime } from "../execute/task_runtime.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { blockIdToJson } from "../blocks/mod.ts";
import { DEFAULT_VIEW_LISTEN } from "../view/access.ts";
import type { HeldStore, LiveStoreMap } from "../view/live_map.ts";
import type { LiveView, RunningBlock } from "../view/report_data.ts";
import type { ViewServer } from "../view/server.ts";

/** Running blocks listed at most (longest running first). */
const RUNNING_LISTED = 500;
/** A page polled this recently is waited for at the end. */
const PAGE_RECENT_MS = 5000;
const LINGER_MS = 3000;
const FINAL_FETCH_MS = 500;

export class RunDashboard {
  readonly observer: RunObserver;
  readonly #pipeline: PipelineConfig;
  readonly #graph: DependencyGraph;
  readonly #listen: string;
  readonly #trackingDir: string;
  #tasks: readonly TaskRuntime[] = [];
  #progress: readonly TaskResult[] = [];
  #finished = false;
  #server: ViewServer | null = null;
  #runId = "";
  readonly #startedAt = new Date();
  #lastBuild = 0;
  #sawFinished = false;
  /** Per task, the live map of its store (null: none, or not kept live). */
  #maps: (LiveStoreMap | null)[] = [];
  readonly #taskIndex = new Map<string, number>();

  /** `serve`: the option's value (true: the default address). InputError without a ledger. */
  constructor(
    pipeline: PipelineConfig,
    graph: DependencyGraph,
    serve: string | true,
    trackingDir: string | undefined,
  ) {
    if (trackingDir === undefined) {
      throw new InputError(
        "--serve shows the run's ledger, and this run keeps none: give --tracking-dir DIR too",
      );
    }
    this.#pipeline = pipeline;
    this.#graph = graph;
    this.#listen = serve === true ? DEFAULT_VIEW_LISTEN : serve;
    this.#trackingDir = trackingDir;
    pipeline.tasks.forEach((task, t) => this.#taskIndex.set(task.id, t));
    const touch = (taskId: string, index: readonly number[]) => {
      const t = this.#taskIndex.get(taskId);
      if (t !== undefined) this.#maps[t]?.touch(index);
    };
    this.observer = {
      runStarted: (tasks) => (this.#progress = tasks),
      blockDone: (done) => touch(done.taskId, done.index),
      blockFailed: (failure) => touch(failure.taskId, failure.index),
      progress: (tasks) => (this.#progress = tasks),
      runFinished: (result) => {
        this.#progress = result.tasks;
        this.#finished = true;
      },
    };
  }

  /** Given to the run loop (`onStarted`): the executors it reads for the blocks running now. */
  readonly attach = (tasks: readonly TaskRuntime[]): void => {
    this.#tasks = tasks;
  };

  /**
   * Start serving (the stores exist by now, and the run's start has written what it writes
   * before any block runs); `stores(t)` is the store the run holds for task t, or null. Returns
   * the URL to print.
   */
  async start(runId: string, stores: (task: number) => HeldStore | null): Promise<string> {
    this.#runId = runId;
    // Loaded only for --serve: the page's script (ECharts) is most of a megabyte to parse.
    const { startViewServer } = await import("../view/server.ts");
    const { LiveStoreMap } = await import("../view/live_map.ts");
    const byPath = new Map<string, LiveStoreMap>();
    this.#maps = this.#pipeline.tasks.map((task, t) => {
      const store = stores(t);
      if (store === null || task.temporary) return null;
      const map = new LiveStoreMap(store);
      byPath.set(map.path, map);
      return map;
    });
    this.#server = await startViewServer({
      target: this.#trackingDir,
      listen: this.#listen,
      live: () => this.live(),
      log: (line) => process.stderr.write(`dashboard: ${line}\n`),
      held: (dir) => (this.#finished ? null : byPath.get(dir) ?? null),
    });
    return this.#server.url;
  }

  /** What the run knows now, for the server's next document. */
  live(): LiveView {
    this.#lastBuild = Date.now();
    if (this.#finished) this.#sawFinished = true;
    const running = this.#running();
    return {
      run_id: this.#runId,
      started_at: this.#startedAt.toISOString(),
      elapsed: (Date.now() - this.#startedAt.getTime()) / 1000,
      tasks: this.#progress.map((t) => ({
        task: t.id,
        total: t.counters.total,
        done: t.counters.completed - t.counters.skipped,
        running: t.running,
        failed: t.counters.failed,
        orphaned: t.counters.orphaned,
        skipped: t.counters.skipped,
        pending: t.counters.ready + t.counters.pending +
          Math.max(0, t.counters.processing - t.running),
      })),
      running: running.slice(0, RUNNING_LISTED),
      running_total: running.length,
      queued_workers: this.#progress.reduce((n, t) => n + (t.queued ?? 0), 0),
      connected_workers: this.#tasks.reduce(
        (n, t) => n + [...t.executors].filter((e) => e.state === "ready").length,
        0,
      ),
      finished: this.#finished,
      live_maps: this.#finished
        ? []
        : this.#pipeline.tasks.filter((_, t) => this.#maps[t] != null).map((task) => task.id),
    };
  }

  #running(): RunningBlock[] {
    const now = Date.now();
    const blocks: RunningBlock[] = [];
    this.#tasks.forEach((task, t) => {
      const layout = this.#graph.layouts[t]!;
      const id = this.#pipeline.tasks[t]!.id;
      for (const e of task.executors) {
        const position = e.state === "ready" ? e.runningPosition() : -1;
        if (position < 0) continue;
        const since = e.inFlight.positionAt(0) === position ? e.inFlight.sentAtAt(0) : now;
        blocks.push({
          task: id,
          id: blockIdToJson(layout.blockIdOf(position)),
          index: layout.gridIndexOf(position),
          worker: `${id}:w${e.id}`,
          seconds: Math.max(0, (now - since) / 1000),
        });
      }
    });
    return blocks.sort((a, b) => b.seconds - a.seconds);
  }

  /** Stop serving, first letting a page that is watching see the run's end. */
  async close(): Promise<void> {
    const server = this.#server;
    if (server === null) return;
    this.#server = null;
    if (Date.now() - this.#lastBuild < PAGE_RECENT_MS) {
      const deadline = Date.now() + LINGER_MS;
      while (!this.#sawFinished && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      // The page then asks for the full document once more.
      if (this.#sawFinished) await new Promise((r) => setTimeout(r, FINAL_FETCH_MS));
    }
    await server.close();
  }
}
