/** Numbers, sizes, durations and times as people read them. */

import type { MetricLayer } from "../report_data.ts";

type Unit = MetricLayer["unit"];

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/** 1536 → "1.5 KiB"; three significant digits at most. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return "–";
  let v = Math.abs(bytes);
  let u = 0;
  while (v >= 1024 && u < BYTE_UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  const sign = bytes < 0 ? "-" : "";
  if (u === 0) return `${sign}${Math.round(v)} B`;
  return `${sign}${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${
    BYTE_UNITS[u]
  }`;
}

/** 0.0123 → "12.3 ms", 3.42 → "3.42 s", 3725 → "1 h 2 min". */
export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return "–";
  const s = Math.abs(seconds);
  const sign = seconds < 0 ? "-" : "";
  if (s === 0) return "0 s";
  // Below 999.5 of a unit: 0.00099999 s is "1.00 ms", not "1.00e+3 µs".
  if (s < 9.995e-4) return `${sign}${(s * 1e6).toPrecision(3)} µs`;
  if (s < 0.9995) return `${sign}${(s * 1e3).toPrecision(3)} ms`;
  if (s < 60) return `${sign}${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
  const total = Math.round(s);
  const d = Math.floor(total / 86400);
  const h = Math.floor((total % 86400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  if (d > 0) return `${sign}${d} d ${h} h`;
  if (h > 0) return `${sign}${h} h ${m} min`;
  return `${sign}${m} min ${sec} s`;
}

/** An integer with thousands separators. */
export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return "–";
  return Math.round(n) === n ? n.toLocaleString("en-US") : n.toPrecision(4);
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** A local date and time, `2024-05-01 13:04:05`. */
export function formatDate(date: Date): string {
  if (!Number.isFinite(date.getTime())) return "–";
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${
    clockTime(date)
  }`;
}

/** `HH:MM:SS` local time. */
export function clockTime(date: Date): string {
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

export function formatIso(iso: string | null | undefined): string {
  return iso ? formatDate(new Date(iso)) : "–";
}

export function formatEpoch(seconds: number): string {
  return formatDate(new Date(seconds * 1000));
}

/** A value of a metric in its unit. */
export function formatValue(value: number | null, unit: Unit): string {
  if (value === null || !Number.isFinite(value)) return "–";
  switch (unit) {
    case "s":
      return formatSeconds(value);
    case "bytes":
      return formatBytes(value);
    case "epoch_s":
      return formatEpoch(value);
    case "count":
      return Math.abs(value - Math.round(value)) < 1e-9
        ? formatCount(Math.round(value))
        : value.toPrecision(3);
    case "percent":
      return formatPercentValue(value);
  }
}

/** 37.5 → "37.5%", 37.4996 → "37.5%", 100 → "100%". */
export function formatPercentValue(value: number): string {
  if (!Number.isFinite(value)) return "–";
  return `${Number(value.toFixed(1))}%`;
}

/** A short axis label for a value (no seconds-to-hours breakdown, no date for times). */
export function formatAxisValue(value: number, unit: Unit): string {
  switch (unit) {
    case "s":
      return formatSeconds(value);
    case "bytes":
      return formatBytes(value);
    case "epoch_s":
      return clockTime(new Date(value * 1000));
    case "count":
      return formatCount(value);
    case "percent":
      return formatPercentValue(value);
  }
}

const METRIC_LABELS: Record<string, string> = {
  wall_seconds: "wall time",
  cpu_seconds: "CPU time",
  peak_rss_bytes: "peak RSS",
  io_read_bytes: "I/O read",
  io_write_bytes: "I/O written",
  gpu_util_pct: "GPU utilisation %",
  gpu_mem_bytes: "GPU memory",
  failures: "failed attempts",
  returned_at: "returned at",
};

export function metricLabel(name: string): string {
  return METRIC_LABELS[name] ?? name.replace(/_/g, " ");
}

export function formatPercent(fraction: number): string {
  if (!Number.isFinite(fraction)) return "–";
  const p = fraction * 100;
  return `${p >= 10 || p === 0 ? p.toFixed(0) : p.toFixed(1)}%`;
}

/** The last path component of `path` (POSIX or Windows separators). */
export function baseName(path: string): string {
  const parts = path.split(/[\\/]+/).filter((p) => p !== "");
  return parts[parts.length - 1] ?? path;
}

/**
 * Labels of a time axis: clock times, or seconds after the start when the whole span is short
 * (ticks less than a second apart would all read the same clock time).
 */
export function timeAxisLabel(t0: number, span: number): (v: number) => string {
  const start = clockTime(new Date(t0 * 1000));
  if (span < 30) return (v: number) => (v <= 0 ? start : `+${formatSeconds(v)}`);
  return (v: number) => clockTime(new Date((t0 + v) * 1000));
}
