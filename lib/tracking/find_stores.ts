/**
 * Which stores a `status` or `reset` PATH names: the store itself, or every store of a tracking
 * directory. A damaged store is still named (and then refused by the validator with its reason)
 * rather than skipped: a folder counts when its `zarr.json` is a blockwise group, cannot be read
 * as one, or is missing or foreign while the folder holds a store's files (`runs.jsonl`, the
 * lock, `done/`, `failures/`).
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { errorCode, InputError, isRecord, messageOf, StoreError } from "../errors.ts";
import { LOCK_FILE } from "./lock.ts";
import { RUNS_LOG_FILE } from "./runs_log.ts";
import { WHAT_A_STORE_IS } from "./store_metadata.ts";

const EXPECTED = `a tracking store (${WHAT_A_STORE_IS}) or a tracking directory (a folder whose ` +
  "immediate subfolders are tracking stores, as `blockwise run --tracking-dir DIR` writes)";

/** Files only a tracking store holds. */
const STORE_FILES = [RUNS_LOG_FILE, LOCK_FILE, "done", "failures"];

/** What `<dir>/zarr.json` says about `dir`. */
function probe(dir: string): "store" | "broken" | "other" | "missing" {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dir, "zarr.json"), "utf8");
  } catch (error) {
    const code = errorCode(error);
    return code === "ENOENT" || code === "ENOTDIR" ? "missing" : "broken";
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return "broken";
  }
  if (!isRecord(doc)) return "broken";
  const attributes = doc["attributes"];
  return isRecord(attributes) && attributes["blockwise"] !== undefined ? "store" : "other";
}

function holdsStoreFiles(dir: string): boolean {
  return STORE_FILES.some((name) => fs.existsSync(path.join(dir, name)));
}

function isCandidate(dir: string): boolean {
  const kind = probe(dir);
  return kind === "store" || kind === "broken" || holdsStoreFiles(dir);
}

/**
 * The store folders PATH names, sorted by name: PATH itself when it is a store (or its
 * `zarr.json`), else its immediate subfolders that are stores, damaged ones included. Folders
 * starting with "." (a store being built) are skipped.
 *
 * Errors: a PATH that names no store (it does not exist, is a plain file, or is a folder that
 * is neither a store nor a tracking directory) is a usage error (InputError, exit 2) saying what
 * was expected; one that cannot be read is a StoreError (exit 3), as is a store that is damaged.
 */
export function findStores(target: string): string[] {
  let abs = path.resolve(target);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(abs);
  } catch (error) {
    if (errorCode(error) === "ENOENT") {
      throw new InputError(`${abs} does not exist; expected ${EXPECTED}`);
    }
    throw new StoreError(`Cannot read ${abs}: ${messageOf(error)}`, abs);
  }
  if (stat.isFile() && path.basename(abs) === "zarr.json") {
    abs = path.dirname(abs);
  } else if (!stat.isDirectory()) {
    throw new InputError(`${abs} is a file; expected ${EXPECTED}`);
  }
  if (probe(abs) !== "missing" || holdsStoreFiles(abs)) return [abs];
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(abs, { withFileTypes: true });
  } catch (error) {
    throw new StoreError(`Cannot list ${abs}: ${messageOf(error)}`, abs);
  }
  const stores = entries
    .filter((e) => e.isDirectory() && !e.name.startsWith("."))
    .map((e) => path.join(abs, e.name))
    .filter(isCandidate);
  if (stores.length === 0) {
    throw new InputError(
      `${abs} is neither a tracking store nor a tracking directory holding any: expected ${EXPECTED}`,
    );
  }
  return stores.sort();
}
