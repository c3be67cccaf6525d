/**
 * `blockwise serve PATH [--listen HOST:PORT]`: a read-only web server for the dashboard of a
 * tracking directory or one store (lib/view/server.ts): the live page, `status --json` as
 * `/api/status`, and each task's ledger as Zarr v3 under `/zarr/<task>/` (for zarrita or
 * neuroglancer). Runs until SIGINT or SIGTERM, then closes and exits 0.
 *
 * Exit codes: 2 when PATH names no store (it is checked before listening) or `--listen` is not
 * an address this machine can listen on; 3 when PATH or a store cannot be read.
 */

import * as path from "node:path";
import process from "node:process";
import { findStores } from "../tracking/find_stores.ts";
import { servedStores } from "../view/served_stores.ts";
import { startViewServer } from "../view/server.ts";
import { EXIT_OK } from "./exit_codes.ts";

export interface ServeOptions {
  /** `HOST:PORT` (default 127.0.0.1:8000). */
  readonly listen?: string;
}

/** Resolves with the first SIGINT or SIGTERM (and stops listening for them). */
function nextStopSignal(): Promise<"SIGINT" | "SIGTERM"> {
  return new Promise((resolve) => {
    const onInt = () => done("SIGINT");
    const onTerm = () => done("SIGTERM");
    const done = (signal: "SIGINT" | "SIGTERM") => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      resolve(signal);
    };
    process.on("SIGINT", onInt);
    process.on("SIGTERM", onTerm);
  });
}

export async function serveCommand(target: string, options: ServeOptions): Promise<number> {
  const abs = path.resolve(target);
  // A PATH that names no store fails here, before anything listens.
  findStores(abs);
  // Listening for Ctrl-C before the server starts: one that arrives while it starts stops it
  // as soon as it is up, with the same message (it was lost under load before).
  const stopped = nextStopSignal();
  const server = await startViewServer({
    target: abs,
    ...(options.listen === undefined ? {} : { listen: options.listen }),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  const lines = [`Serving the dashboard of ${abs} at ${server.url}`];
  let stores: readonly { task: string }[] = [];
  try {
    stores = servedStores(abs);
  } catch {
    // The target changed since it was checked: the server says so when asked.
  }
  if (stores.length > 0) {
    lines.push("The ledger of each task as Zarr v3 (a neuroglancer source):");
    for (const s of stores) {
      lines.push(`  ${s.task}: zarr3://${server.url}zarr/${encodeURIComponent(s.task)}/`);
    }
  }
  lines.push("Press Ctrl-C to stop.");
  process.stdout.write(`${lines.join("\n")}\n`);
  const signal = await stopped;
  process.stderr.write(`Received ${signal}: stopping the server.\n`);
  await server.close();
  return EXIT_OK;
}
