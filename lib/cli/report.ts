/**
 * `blockwise report TARGET [-o FILE]`: one self-contained HTML file of what the stores of
 * TARGET (a tracking dir or one store) say: counts, runs, the block map, distributions, the
 * slowest blocks, the timeline and the failures (docs/design/REPORT.md). The stores are read as
 * `status` reads them (no lock, no mmap), so a report can be made during a run.
 *
 * The file is written to a temporary name beside FILE and renamed over it, so a reader never
 * sees half a report. Exit codes as `status`: 2 for a TARGET that does not exist or an output
 * path that cannot be written, 3 for a store that cannot be read.
 */

import { Buffer } from "node:buffer";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { createFailureAdvice, errorCode, InputError } from "../errors.ts";
import { formatBytes } from "../report/utilization.ts";
import { formatCount } from "../report/table.ts";
import { writeFileAtomic } from "../zarr/atomic_write.ts";
import { buildReport } from "../view/report_build.ts";
import { renderReportPage } from "../view/page.ts";
import { DEFAULT_REPORT_FILE } from "../view/report_data.ts";
import { EXIT_OK, EXIT_STORE_REFUSED } from "./exit_codes.ts";

export interface ReportOptions {
  readonly output?: string;
}

export function reportCommand(target: string, options: ReportOptions): number {
  const file = path.resolve(options.output ?? DEFAULT_REPORT_FILE);
  checkOutputPath(file);
  const data = buildReport(target);
  const html = renderReportPage(data);
  try {
    writeFileAtomic(file, html);
  } catch (error) {
    if (errorCode(error) === undefined) throw error;
    throw new InputError(
      `Cannot write the report ${file} (-o): ${createFailureAdvice(error, file)}`,
    );
  }
  const blocks = data.status.stores.reduce((n, s) => n + s.blocks, 0);
  const tasks = data.tasks.length;
  process.stdout.write(
    `Wrote ${file} (${formatBytes(Buffer.byteLength(html))}): ${formatCount(tasks)} ${
      tasks === 1 ? "task" : "tasks"
    }, ${formatCount(blocks)} blocks. Open ${pathToFileURL(file).href} in a browser.\n`,
  );
  for (const f of data.status.errors) process.stderr.write(`error: ${f.error}\n`);
  return data.status.errors.length > 0 ? EXIT_STORE_REFUSED : EXIT_OK;
}

/** Refuse an output that is a folder, or whose folder is missing, before reading any store. */
function checkOutputPath(file: string): void {
  let stat: fs.Stats | null = null;
  try {
    stat = fs.statSync(file);
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
  if (stat?.isDirectory() === true) {
    throw new InputError(
      `Cannot write the report to ${file} (-o): it is a folder. Name a file, e.g. -o ${
        path.join(file, DEFAULT_REPORT_FILE)
      }`,
    );
  }
  const folder = path.dirname(file);
  if (!fs.existsSync(folder)) {
    throw new InputError(
      `Cannot write the report to ${file} (-o): the folder ${folder} does not exist. Create it (mkdir -p ${folder}) or choose another path`,
    );
  }
}
