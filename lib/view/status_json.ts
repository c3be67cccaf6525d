/**
 * The document `blockwise status --json TARGET` prints, also served by `blockwise serve` as
 * `GET /api/status` and inlined in every report: `{"stores": [...], "errors": [...]}` (schema
 * in lib/tracking/inspect.ts), each store with its failed blocks (lib/outputs/errors_log.ts).
 */

import { type FailedBlockReport, failedBlocks } from "../outputs/errors_log.ts";
import { findStores } from "../tracking/find_stores.ts";
import {
  inspectStores,
  type StoreFailureReport,
  type StoreInspection,
  type StoreReport,
} from "../tracking/inspect.ts";

/** Failed blocks listed per store unless all are asked for (`status --json --failed`). */
export const JSON_FAILED_LIMIT = 1000;

export interface StatusJsonStore extends StoreReport {
  readonly failed_blocks: readonly FailedBlockReport[];
  readonly failed_blocks_total: number;
}

export interface StatusJson {
  readonly stores: readonly StatusJsonStore[];
  readonly errors: readonly StoreFailureReport[];
}

/** A store's failed blocks, the first `limit` of them listed (`failedBlocks`). */
export type FailedList = ReturnType<typeof failedBlocks>;

/**
 * The JSON of inspected stores, each with up to `failedLimit` failed blocks, taken from
 * `failed` (a longer list read already) when given.
 */
export function statusJsonOf(
  inspections: readonly StoreInspection[],
  failures: readonly StoreFailureReport[],
  failedLimit = JSON_FAILED_LIMIT,
  failed?: readonly FailedList[],
): StatusJson {
  const stores = inspections.map((i, k) => {
    const f = failed?.[k] ?? failedBlocks(i.report.path, failedLimit);
    return {
      ...i.report,
      failed_blocks: f.blocks.length > failedLimit ? f.blocks.slice(0, failedLimit) : f.blocks,
      failed_blocks_total: f.total,
    };
  });
  return { stores, errors: failures };
}

/** `status --json TARGET`: throws InputError / StoreError as `findStores` does. */
export function statusJson(target: string, failedLimit = JSON_FAILED_LIMIT): StatusJson {
  const { inspections, failures } = inspectStores(findStores(target), null);
  return statusJsonOf(inspections, failures, failedLimit);
}
