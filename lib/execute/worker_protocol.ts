/**
 * Per-block resource figures as the tracking store reads them. The figures arrive in result
 * records (`protocol/messages.ts`), `USAGE_FIELDS` numbers in `Usage` order.
 */

import { Usage, USAGE_FIELDS } from "./protocol/messages.ts";

export { Usage, USAGE_FIELDS };

/** Per-block figures measured by a worker (resource tracking). */
export interface BlockUsage {
  readonly wallSeconds: number;
  readonly cpuSeconds: number;
  readonly peakRssBytes: number;
  readonly ioReadBytes: number;
  readonly ioWriteBytes: number;
}

export function usageFromFigures(figures: ArrayLike<number> | null): BlockUsage | null {
  if (figures === null || figures.length < USAGE_FIELDS) return null;
  return {
    wallSeconds: figures[Usage.WallSeconds]!,
    cpuSeconds: figures[Usage.CpuSeconds]!,
    peakRssBytes: figures[Usage.PeakRssBytes]!,
    ioReadBytes: figures[Usage.IoReadBytes]!,
    ioWriteBytes: figures[Usage.IoWriteBytes]!,
  };
}
