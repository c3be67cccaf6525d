/**
 * A live page (`blockwise serve`, `run --serve`): a first frame to paint quickly, the full
 * document from `api/report` right after, then a cheap frame from `api/frame` every second
 * merged into it, and the full document again every 10 s or when the user picks a layer frames
 * do not carry. URLs are relative, so the page
 * works under the server's `/<token>/` prefix. Polling stops once the run is finished (after
 * one last full document); a failed fetch shows "connection lost" and is retried.
 */

import type { ReportData, TaskView } from "../report_data.ts";
import type { ReportApp } from "./app.ts";
import { clockTime } from "./format.ts";
import { STATE_LAYER } from "./map_layers.ts";

const FRAME_EVERY_MS = 1000;
const FULL_EVERY_MS = 10_000;
const RETRY_MS = 2000;
/** A layer picked within this long after a full fetch is fresh enough. */
const FRESH_MS = 2000;

async function fetchReport(url: string): Promise<ReportData> {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return (await response.json()) as ReportData;
}

/** A frame's task, with what frames leave out taken from the last full document's task. */
function mergeTask(frame: TaskView, full: TaskView | undefined): TaskView {
  if (full === undefined) return frame;
  // Frames may leave the fields out altogether, whatever the type says.
  const f: Partial<TaskView> = frame;
  const sameGrid = JSON.stringify(frame.map.shape) === JSON.stringify(full.map.shape);
  const metrics = frame.map.metrics?.length ? frame.map.metrics : sameGrid ? full.map.metrics : [];
  const workers = frame.map.workers ?? (sameGrid ? full.map.workers : null);
  return {
    ...frame,
    map: { ...frame.map, metrics, workers },
    distributions: f.distributions?.length ? frame.distributions : full.distributions,
    slowest: f.slowest?.length ? frame.slowest : full.slowest,
    timeline: f.timeline ?? full.timeline,
  };
}

/** The frame merged into the last full document. */
export function mergeFrame(full: ReportData, frame: ReportData): ReportData {
  const byTask = new Map(full.tasks.map((t) => [t.task, t]));
  return { ...frame, tasks: frame.tasks.map((t) => mergeTask(t, byTask.get(t.task))) };
}

export class LivePoller {
  private full: ReportData | null = null;
  private fullAt = 0;
  private wantFull = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private busy = false;
  private stopped = false;
  /** Something was shown (the first frame), before any full document arrived. */
  private painted = false;

  constructor(private readonly app: ReportApp) {
    app.onLayerPicked = (name) => {
      if (name === STATE_LAYER || Date.now() - this.fullAt < FRESH_MS) return;
      this.wantFull = true;
      this.schedule(0);
    };
  }

  start(): void {
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private async tick(): Promise<void> {
    if (this.busy || this.stopped) return;
    this.busy = true;
    let next = FRAME_EVERY_MS;
    try {
      const full = this.full;
      const needFull = full === null || this.wantFull || Date.now() - this.fullAt >= FULL_EVERY_MS;
      let shown: ReportData;
      if (full === null && !this.painted) {
        // First paint from a frame (the counts and the state layer), which the server builds
        // faster than the full document (a 10^8-block store: about a third less); the full
        // document follows at once.
        shown = await fetchReport("api/frame");
        this.painted = true;
        if (shown.parts === "full") {
          this.full = shown;
          this.fullAt = Date.now();
        } else {
          next = 0;
        }
      } else if (needFull || full === null) {
        this.wantFull = false;
        shown = await this.fetchFull();
      } else {
        const frame = await fetchReport("api/frame");
        if (frame.parts === "full") {
          this.full = frame;
          this.fullAt = Date.now();
          shown = frame;
        } else shown = mergeFrame(full, frame);
        if (shown.live?.finished) {
          // The last word is a full document (the finished run's metrics and timeline) when
          // the server has one that knows the run finished; the run's server may also be gone
          // already, and then the frame says it all.
          try {
            const last = await this.fetchFull();
            if (last.live?.finished) shown = last;
          } catch {
            // Keep the frame.
          }
        }
      }
      this.show(shown);
      // Without a run in flight (`serve` of a ledger) the page keeps polling: a run started
      // elsewhere may be writing the ledger.
      if (shown.live?.finished && this.full !== null) {
        this.stopped = true;
        this.app.setBadge(`finished · updated ${clockTime(new Date())}`, "finished");
      }
    } catch (error) {
      console.warn("blockwise report: refresh failed, retrying:", error);
      this.app.setBadge("connection lost, retrying", "lost");
      next = RETRY_MS;
    } finally {
      this.busy = false;
    }
    this.schedule(next);
  }

  private async fetchFull(): Promise<ReportData> {
    const full = await fetchReport("api/report");
    this.full = full;
    this.fullAt = Date.now();
    return full;
  }

  private show(data: ReportData): void {
    this.app.render(data);
    this.app.setBadge(`live · updated ${clockTime(new Date())}`, "ok");
    if (!this.app.hook.ready) this.app.markReady();
  }
}
