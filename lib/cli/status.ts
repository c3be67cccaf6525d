/**
 * `blockwise status PATH [--json] [--map] [--axis A] [--slice N]`: what the tracking stores say,
 * read without the lock and without mmap (lib/tracking/inspect.ts), so it answers while a run
 * holds a store.
 *
 * PATH is one task's store or a tracking directory (every store in it). `--json` prints
 * `{"stores": [StoreReport, ...], "errors": [{path, error}, ...]}` (schema in
 * lib/tracking/inspect.ts). `--map` draws each task's block grid (lib/tracking/grid_map.ts);
 * `--axis` / `--slice` choose the projection or slice of a 3-D or larger grid and imply `--map`.
 *
 * Every store is checked by the validator `run`, `reset` and `migrate` use. A store it refuses
 * does not hide the others: the readable ones are reported, then each refused one is named on
 * stderr with what is wrong and how to fix it (in `--json`, under `errors`).
 *
 * Exit codes: 0 whatever the blocks' states; 2 when PATH does not exist or `--axis` / `--slice`
 * is out of range; 3 when PATH is not a store or a tracking directory, or any store's metadata
 * or chunk files cannot be read (after reporting the others).
 */

import process from "node:process";
import { InvalidArgumentError } from "commander";
import { roiToString } from "../geometry/mod.ts";
import { formatBytes } from "../report/utilization.ts";
import { formatCount, formatShape } from "../report/table.ts";
import { GridMap } from "../tracking/grid_map.ts";
import { findStores } from "../tracking/find_stores.ts";
import { inspectStores, type OutputReport, type StoreReport } from "../tracking/inspect.ts";
import { EXIT_OK, EXIT_STORE_REFUSED } from "./exit_codes.ts";
import { LineWriter } from "./output.ts";
import { failedBlocks } from "../outputs/errors_log.ts";
import { JSON_FAILED_LIMIT, statusJsonOf } from "../view/status_json.ts";

export interface StatusOptions {
  readonly json?: boolean;
  readonly map?: boolean;
  readonly axis?: number;
  readonly slice?: number;
  /** `--failed`: list each failed block with its last error (errors.jsonl). */
  readonly failed?: boolean;
}

/** Commander parser for `--axis` / `--slice`: a whole number >= 0. */
export function parseIndexOption(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError(`expected a whole number >= 0, got "${value}"`);
  }
  return n;
}

function plural(n: number, word: string): string {
  return `${formatCount(n)} ${word}${n === 1 ? "" : "s"}`;
}

function seconds(s: number): string {
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms`;
  if (s < 120) return `${s.toFixed(2)} s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m} min ${Math.round(s - m * 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** Committed outputs on disk, and for a temporary task the deleted (live = on disk) ones. */
function formatOutputs(o: OutputReport): string {
  const live = `${formatCount(o.present_blocks)} block${o.present_blocks === 1 ? "" : "s"}`;
  if (!o.temporary) return `${live} on disk (${formatBytes(o.present_bytes)})`;
  return `temporary: ${formatCount(o.deleted_blocks)} deleted (${formatBytes(o.deleted_bytes)}), ${
    formatCount(o.present_blocks)
  } live (${formatBytes(o.present_bytes)})` +
    (o.nondeterministic ? "; non-deterministic (a regenerated block came back different)" : "");
}

/** The human lines for one store. */
export function formatStoreReport(r: StoreReport): string[] {
  const lines: string[] = [];
  const field = (name: string, text: string) => lines.push(`  ${name.padEnd(10)} ${text}`);
  lines.push(`task "${r.task}"  ${r.path}`);
  const grids = formatShape(r.block_grid_shape) === formatShape(r.grid_shape)
    ? `block grid ${formatShape(r.block_grid_shape)}`
    : `block grid ${formatShape(r.block_grid_shape)}, tracking grid ${formatShape(r.grid_shape)}`;
  field(
    "blocks",
    `${formatCount(r.blocks)} (${grids})` +
      (r.untracked_blocks > 0 ? `, plus ${formatCount(r.untracked_blocks)} not tracked` : ""),
  );
  field("done", `${formatCount(r.done)} (${r.percent_done.toFixed(2)}%)`);
  field(
    "failed",
    `${formatCount(r.failed)}` +
      (r.failed_attempts > 0 ? ` (${plural(r.failed_attempts, "failed attempt")} in all)` : ""),
  );
  field("pending", formatCount(r.pending));
  const reset = r.outputs?.reset_blocks ?? 0;
  if (reset > 0) {
    field(
      "reset",
      `${plural(reset, "block")} reset by blockwise reset: the next run rebuilds ${
        reset === 1 ? "it" : "them"
      }`,
    );
  }
  if (r.outputs !== null) field("outputs", formatOutputs(r.outputs));
  let runs = r.runs === 0 ? "none recorded" : formatCount(r.runs);
  const last = r.last_run;
  if (last !== null) {
    const parts = [
      last.started_at === null ? null : `started ${last.started_at}`,
      last.seconds === null ? null : `took ${seconds(last.seconds)}`,
      last.outcome,
      last.exit_code === null ? null : `exit ${last.exit_code}`,
      last.tracking_io === null ? null : `store I/O ${last.tracking_io}`,
    ].filter((p): p is string => p !== null);
    runs += `; last: ${parts.join(", ")}`;
    if (last.skip_mask !== null) {
      runs += `; its skip mask ${last.skip_mask.source} skipped ${
        formatCount(last.skip_mask.skipped)
      } blocks (not recorded)`;
    }
  }
  if (r.torn_lines > 0) runs += ` (${plural(r.torn_lines, "torn line")} in runs.jsonl skipped)`;
  field("runs", runs);
  if (r.missing_chunks.length > 0) {
    field(
      "missing",
      `the chunk file of ${
        r.missing_chunks.map((n) => `"${n}"`).join(", ")
      }: read as the fill value (as Zarr does); the next run or reset restores it`,
    );
  }
  if (r.lock === null && r.lock_unreadable !== null) {
    const u = r.lock_unreadable;
    field(
      "lock",
      `unreadable lock file (${u.bytes} B, written ${u.modified_at}): ${
        u.next_run === "refuses"
          ? "a run may be creating it, so the next run refuses the store for now"
          : "left by a run that died creating it; the next run takes it over"
      }`,
    );
  } else if (r.lock === null) {
    field("lock", "free");
  } else {
    const l = r.lock;
    const state = l.alive === true
      ? "running"
      : l.alive === false
      ? "not running: stale, the next run takes it over"
      : "on another host, cannot check";
    field(
      "lock",
      `held by pid ${l.pid} on ${l.host} since ${l.started_at} (${state}): ${l.command}`,
    );
  }
  const layout = r.layout;
  field(
    "layout",
    `total ${roiToString(layout.total_roi)}, read ${roiToString(layout.read_roi)}, write ${
      roiToString(layout.write_roi)
    }, fit ${layout.fit}`,
  );
  if (r.resources === null) {
    field("resources", "not tracked (run with --resource-tracking to record them)");
  } else {
    const x = r.resources;
    field(
      "resources",
      `${plural(x.blocks_measured, "block")} measured: wall ${seconds(x.wall_seconds_total)}` +
        (x.wall_seconds_mean === null ? "" : ` (mean ${seconds(x.wall_seconds_mean)})`) +
        `, CPU ${seconds(x.cpu_seconds_total)}` +
        (x.peak_rss_bytes_max === null ? "" : `, peak RSS ${formatBytes(x.peak_rss_bytes_max)}`) +
        `, read ${formatBytes(x.io_read_bytes_total)}, written ${
          formatBytes(x.io_write_bytes_total)
        }`,
    );
    if (x.gpu !== undefined && x.gpu !== null) {
      const g = x.gpu;
      field(
        "",
        `GPU: ${
          g.util_pct_mean === null
            ? "no utilisation read"
            : `mean utilisation ${g.util_pct_mean.toFixed(1)} % over ${
              plural(g.blocks_measured, "block")
            }`
        }, peak device memory ${formatBytes(g.mem_bytes_max)}`,
      );
    }
    if (x.first_sent_at !== null || x.last_returned_at !== null) {
      field(
        "",
        `first block sent ${x.first_sent_at ?? "?"}, last returned ${x.last_returned_at ?? "?"}`,
      );
    }
  }
  return lines;
}

export async function statusCommand(target: string, options: StatusOptions): Promise<number> {
  const map = options.map === true || options.axis !== undefined || options.slice !== undefined;
  // Made before anything is read, so a bad --axis/--slice fails before anything is printed.
  const color = process.stdout.isTTY === true && process.env["NO_COLOR"] === undefined;
  const width = Math.max(20, (process.stdout.isTTY ? process.stdout.columns : undefined) ?? 80);
  const makeMap = map
    ? (shape: readonly number[]) =>
      new GridMap(shape, {
        width: width - 2,
        color,
        ...(options.axis === undefined ? {} : { axis: options.axis }),
        ...(options.slice === undefined ? {} : { slice: options.slice }),
      })
    : null;
  const { inspections, failures } = inspectStores(findStores(target), makeMap);
  const exitCode = failures.length > 0 ? EXIT_STORE_REFUSED : EXIT_OK;
  const out = new LineWriter();
  if (options.json) {
    const limit = options.failed === true ? Infinity : JSON_FAILED_LIMIT;
    await out.line(JSON.stringify(statusJsonOf(inspections, failures, limit), null, 2));
    await out.flush();
    return exitCode;
  }
  const maps = inspections.map((i) => i.map?.render() ?? null);
  const stores = inspections.length + failures.length;
  if (stores > 1) {
    const total = inspections.reduce((n, i) => n + i.report.blocks, 0);
    const done = inspections.reduce((n, i) => n + i.report.done, 0);
    const failed = inspections.reduce((n, i) => n + i.report.failed, 0);
    await out.line(
      `${plural(stores, "tracking store")}: ${formatCount(done)}/${
        formatCount(total)
      } blocks done, ${formatCount(failed)} failed` +
        (failures.length > 0 ? `; ${formatCount(failures.length)} cannot be read (see below)` : ""),
    );
    await out.line("");
  }
  for (let i = 0; i < inspections.length; i++) {
    if (i > 0) await out.line("");
    for (const line of formatStoreReport(inspections[i]!.report)) await out.line(line);
    if (options.failed === true) {
      for (
        const line of formatFailedBlocks(inspections[i]!.report.task, inspections[i]!.report.path)
      ) {
        await out.line(line);
      }
    }
    const m = maps[i];
    if (m !== null && m !== undefined) {
      await out.line("");
      for (const line of m.split("\n")) await out.line(`  ${line}`);
    }
  }
  await out.flush();
  // Refused stores last, on stderr like any error, each with the validator's reason and fix.
  for (const f of failures) process.stderr.write(`error: ${f.error}\n`);
  return exitCode;
}

/** `status --failed`: each failed block, its attempts and its last error with stack lines. */
export function formatFailedBlocks(task: string, store: string): string[] {
  const { blocks } = failedBlocks(store);
  if (blocks.length === 0) return ["  failed blocks: none"];
  const lines = [`  failed blocks (${formatCount(blocks.length)}), each with its last error:`];
  for (const b of blocks) {
    const e = b.last_error;
    lines.push(
      `    ${task}/${b.block}  index (${b.index.join(", ")})  ${plural(b.attempts, "attempt")}` +
        (e === null
          ? "  (no error recorded: failed before errors.jsonl was kept)"
          : `  last at ${e.at} (attempt ${e.attempt}, run ${e.run_id.slice(0, 8)})`),
    );
    if (e !== null) {
      lines.push(`      ${e.message}`);
      for (const l of e.stack.slice(1, 4)) lines.push(`      ${l.trim()}`);
    }
  }
  return lines;
}
