/**
 * The layers of one block map, decoded on first use: the state codes, each metric and the
 * workers. Decoded arrays are cached per layer object, so a live page that keeps the metric
 * layers of its last full document does not decode them again every second.
 */

import type {
  BlockMap as BlockMapData,
  MetricLayer,
  MetricName,
  WorkerLayer,
} from "../report_data.ts";
import {
  CELL_DELETED_TEMPORARY,
  CELL_DONE,
  CELL_EMPTY,
  CELL_FAILED,
  CELL_NEVER_RUN,
  CELL_PARTLY_DONE,
} from "../report_data.ts";
import {
  EMPTY_COLOR,
  hexToRgb,
  metricLut,
  NO_VALUE_COLOR,
  pack,
  rgbToHex,
  STATE_COLORS,
  stateColorOf,
  stateLut,
  workerLut,
} from "./colors.ts";
import { base64Bytes, dequantise, u16le } from "./decode.ts";

export const STATE_LAYER = "state";
export const WORKER_LAYER = "worker";

// One cache per field, keyed by the object holding it (a state layer holds two fields).
const decodedCodes = new WeakMap<object, Uint8Array>();
const decodedFractions = new WeakMap<object, Uint8Array>();
const decodedMetrics = new WeakMap<object, Uint8Array>();
const decodedWorkers = new WeakMap<object, Uint16Array>();

function bytesOf(cache: WeakMap<object, Uint8Array>, owner: object, base64: string): Uint8Array {
  let bytes = cache.get(owner);
  if (bytes === undefined) {
    bytes = base64Bytes(base64);
    cache.set(owner, bytes);
  }
  return bytes;
}

let stateTable: Uint32Array | null = null;
let metricTable: Uint32Array | null = null;

/** What the map draws for one layer: per-cell keys and the colour of each key. */
export interface Paint {
  readonly source: Uint8Array | Uint16Array;
  /** For the state layer with done fractions: the lookup is over `code << 8 | fraction`. */
  readonly second: Uint8Array | null;
  readonly lut: Uint32Array;
}

export const STATE_NAMES: Readonly<Record<number, string>> = {
  [CELL_NEVER_RUN]: "never run",
  [CELL_DONE]: "done",
  [CELL_FAILED]: "failed",
  [CELL_DELETED_TEMPORARY]: "deleted temporary",
  [CELL_PARTLY_DONE]: "partly done",
  [CELL_EMPTY]: "no block",
};

export class MapLayers {
  readonly metrics: readonly MetricLayer[];
  readonly workers: WorkerLayer | null;

  constructor(readonly data: BlockMapData) {
    this.metrics = data.metrics;
    this.workers = data.workers;
  }

  /** Layer names in menu order: state, the metrics, worker. */
  names(): string[] {
    const names = [STATE_LAYER, ...this.metrics.map((m) => m.name)];
    if (this.workers !== null) names.push(WORKER_LAYER);
    return names;
  }

  has(name: string): boolean {
    return this.names().includes(name);
  }

  metric(name: string): MetricLayer | null {
    return this.metrics.find((m) => m.name === name) ?? null;
  }

  codes(): Uint8Array {
    return bytesOf(decodedCodes, this.data.state, this.data.state.codes);
  }

  fractions(): Uint8Array | null {
    const f = this.data.state.done_fraction;
    return f === null ? null : bytesOf(decodedFractions, this.data.state, f);
  }

  metricBytes(layer: MetricLayer): Uint8Array {
    return bytesOf(decodedMetrics, layer, layer.values);
  }

  workerNumbers(): Uint16Array | null {
    const w = this.workers;
    if (w === null) return null;
    let numbers = decodedWorkers.get(w);
    if (numbers === undefined) {
      numbers = u16le(base64Bytes(w.values));
      decodedWorkers.set(w, numbers);
    }
    return numbers;
  }

  paint(name: string): Paint {
    const metric = this.metric(name);
    if (metric !== null) {
      metricTable ??= metricLut();
      return { source: this.metricBytes(metric), second: null, lut: metricTable };
    }
    const workers = name === WORKER_LAYER ? this.workerNumbers() : null;
    if (workers !== null && this.workers !== null) {
      return { source: workers, second: null, lut: workerLutOf(this.workers) };
    }
    stateTable ??= stateLut();
    const fractions = this.fractions();
    if (fractions !== null) return { source: this.codes(), second: fractions, lut: stateTable };
    // Without fractions the lookup is over the code alone: every 256th entry of the table.
    const byCode = new Uint32Array(256);
    for (let c = 0; c < 256; c++) byCode[c] = stateTable[c << 8]!;
    return { source: this.codes(), second: null, lut: byCode };
  }

  /** State of a cell: its code and done fraction (0..1, from the codes when not stored). */
  stateAt(flat: number): { readonly code: number; readonly fraction: number } {
    const code = this.codes()[flat] ?? CELL_EMPTY;
    const fractions = this.fractions();
    const fraction = fractions !== null ? (fractions[flat] ?? 0) / 255 : code === CELL_DONE ? 1 : 0;
    return { code, fraction };
  }

  metricAt(name: MetricName | string, flat: number): number | null {
    const layer = this.metric(name);
    if (layer === null) return null;
    return dequantise(layer, this.metricBytes(layer)[flat] ?? 0);
  }

  workerAt(flat: number): number | null {
    const w = this.workerNumbers()?.[flat];
    return w === undefined || w === 65535 ? null : w;
  }

  /** The state codes present, for the legend (a scan over the cells, once per data). */
  statesPresent(): Set<number> {
    const seen = new Set<number>();
    const codes = this.codes();
    const flags = new Uint8Array(256);
    for (let i = 0; i < codes.length; i++) flags[codes[i]!] = 1;
    for (let c = 0; c < 256; c++) if (flags[c]) seen.add(c);
    return seen;
  }
}

const workerLuts = new WeakMap<object, Uint32Array>();

function workerLutOf(w: WorkerLayer): Uint32Array {
  let lut = workerLuts.get(w);
  if (lut === undefined) {
    lut = workerLut(w.workers);
    workerLuts.set(w, lut);
  }
  return lut;
}

/** The colour of the empty margin of a wrapped grid's last row. */
export const EMPTY_PIXEL = pack(hexToRgb(EMPTY_COLOR));

export interface StateSwatch {
  readonly key: string;
  readonly label: string;
  readonly color: string;
}

/** The state legend: the colours of the states present, in a fixed order. */
export function stateSwatches(present: ReadonlySet<number>): StateSwatch[] {
  const out: StateSwatch[] = [
    { key: "done", label: "done", color: STATE_COLORS.done },
    { key: "failed", label: "failed", color: STATE_COLORS.failed },
    { key: "never_run", label: "never run", color: STATE_COLORS.never_run },
  ];
  if (present.has(CELL_DELETED_TEMPORARY)) {
    out.push({
      key: "deleted_temporary",
      label: "deleted temporary",
      color: STATE_COLORS.deleted_temporary,
    });
  }
  if (present.has(CELL_PARTLY_DONE)) {
    out.push({
      key: "partly_done",
      label: "partly done",
      color: rgbToHex(stateColorOf(CELL_PARTLY_DONE, 0.5)),
    });
  }
  if (present.has(CELL_EMPTY)) out.push({ key: "empty", label: "no block", color: EMPTY_COLOR });
  return out;
}

export { NO_VALUE_COLOR };
