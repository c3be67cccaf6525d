/**
 * The page's CSS, inlined by lib/view/page.ts (as CLIENT_STYLE of the generated bundle module).
 * Light theme, system fonts, nothing fetched.
 */

export const STYLE = `
:root {
  --fg: #1d2329; --muted: #5f6b76; --line: #dde2e7; --bg: #ffffff; --panel: #f6f8fa;
  --accent: #1f4fd1; --good: #2e9e44; --bad: #d62728; --warn-bg: #fff8e1; --warn-line: #f0c36d;
  color-scheme: light;
}
* { box-sizing: border-box; }
html { background: var(--bg); }
body {
  margin: 0; color: var(--fg); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
main { max-width: 1000px; margin: 0 auto; padding: 16px 20px 64px; }
h1 { font-size: 22px; margin: 0; font-weight: 600; }
h1 .target { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
h2 { font-size: 18px; margin: 0 0 2px; font-weight: 600; word-break: break-all; }
h3 { font-size: 15px; margin: 16px 0 6px; }
h4 { font-size: 13px; margin: 12px 0 6px; color: var(--muted); font-weight: 600; }
header { border-bottom: 1px solid var(--line); padding-bottom: 10px; margin-bottom: 14px; }
.title-row { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
.meta, .path, .muted { color: var(--muted); }
.meta { margin: 4px 0 0; word-break: break-all; }
.path { margin: 0 0 10px; font-size: 12px; word-break: break-all;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.live-badge { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #e7f4ea;
  color: #1d6b2f; border: 1px solid #b9dfc2; }
.live-badge[data-state="lost"] { background: #fdecea; color: #8c1c13; border-color: #f3b7b1; }
.live-badge[data-state="finished"] { background: var(--panel); color: var(--muted);
  border-color: var(--line); }
.tasks-nav { display: flex; flex-wrap: wrap; gap: 4px 12px; margin: 0 0 12px; font-size: 13px; }
.tasks-nav a { color: var(--accent); text-decoration: none; }
section.task, section.live { border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px;
  margin: 0 0 18px; background: var(--bg); }
section.live { background: var(--panel); }
details.part { border-top: 1px solid var(--line); padding: 6px 0; }
details.part > summary { cursor: pointer; font-weight: 600; font-size: 15px; padding: 4px 0;
  user-select: none; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr));
  gap: 6px 14px; margin: 8px 0; }
.facts div { background: var(--panel); border-radius: 6px; padding: 6px 10px; }
.facts dt { font-size: 11px; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
.facts dd { margin: 0; font-size: 16px; font-variant-numeric: tabular-nums; word-break: break-word; }
.progress { display: flex; height: 12px; border-radius: 6px; overflow: hidden;
  background: #eef1f4; margin: 6px 0; }
.progress.small { height: 8px; min-width: 120px; margin: 0; }
.progress span { display: block; height: 100%; }
.badge { display: inline-block; font-size: 12px; padding: 1px 7px; border-radius: 9px;
  margin: 2px 6px 2px 0; background: var(--panel); border: 1px solid var(--line); }
.badge.good { background: #e7f4ea; border-color: #b9dfc2; color: #1d6b2f; }
.badge.bad { background: #fdecea; border-color: #f3b7b1; color: #8c1c13; }
.warning, .warning-box { background: var(--warn-bg); border: 1px solid var(--warn-line);
  border-radius: 6px; padding: 8px 12px; }
.warning-box { margin: 0 0 16px; }
.warning-box p { margin: 4px 0; }
table.data { border-collapse: collapse; width: 100%; font-size: 13px; margin: 4px 0 8px; }
table.data th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px;
  border-bottom: 1px solid var(--line); padding: 4px 8px; white-space: nowrap; }
table.data td { border-bottom: 1px solid #eef1f4; padding: 4px 8px; vertical-align: top;
  font-variant-numeric: tabular-nums; }
table.data tbody tr:hover { background: #f3f6fa; }
table.clickable tbody tr { cursor: pointer; }
table.data tr.picked { background: #e6edfb; }
pre.message { margin: 0; white-space: pre-wrap; word-break: break-word; max-height: 16em;
  overflow: auto; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre.traceback { margin: 4px 0; white-space: pre; overflow: auto; max-height: 24em;
  padding: 6px 8px; background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.chart { width: 100%; margin: 6px 0; }
.chart-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr));
  gap: 8px 16px; }
.map-controls { display: flex; flex-wrap: wrap; gap: 6px 16px; align-items: center; margin: 6px 0; }
.map-controls label { font-size: 13px; color: var(--muted); display: inline-flex;
  align-items: center; gap: 6px; }
.map-controls select, .map-controls input { font: inherit; font-size: 13px; }
.slice input[type="range"] { width: 160px; }
.slice-number { width: 64px; }
.map-legend { margin: 4px 0 8px; }
.legend { display: flex; flex-wrap: wrap; align-items: center; gap: 4px 12px; font-size: 12px; }
.legend-title { font-weight: 600; }
.legend-item { display: inline-flex; align-items: center; gap: 4px; }
.legend-note { color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  border: 1px solid rgba(0,0,0,.15); }
canvas.colorbar { width: 180px; height: 12px; image-rendering: pixelated;
  border: 1px solid rgba(0,0,0,.15); }
.map-scroll { overflow: auto; max-width: 100%; max-height: 80vh; border: 1px solid var(--line);
  display: inline-block; line-height: 0; }
canvas.map { display: block; image-rendering: crisp-edges; image-rendering: pixelated;
  cursor: crosshair; }
.tooltip { position: fixed; z-index: 10; max-width: 460px; background: #fff; color: var(--fg);
  border: 1px solid #c9d1d9; border-radius: 6px; padding: 8px 10px; font-size: 12px;
  box-shadow: 0 4px 16px rgba(0,0,0,.12); pointer-events: none; }
.tooltip.pinned { pointer-events: auto; border-color: var(--accent); }
.tooltip[hidden] { display: none; }
.tip-head { font-weight: 600; margin-bottom: 4px; }
.tip-row { display: flex; gap: 8px; }
.tip-label { color: var(--muted); min-width: 92px; }
.tip-error { margin-top: 4px; color: #8c1c13; }
.tip-hint { margin-top: 6px; color: var(--muted); font-style: italic; }
.served { margin: 6px 0 10px; }
.served-line { display: flex; gap: 8px; align-items: center; margin: 3px 0; }
.served-line input { flex: 1; font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  padding: 3px 6px; border: 1px solid var(--line); border-radius: 4px; }
button { font: inherit; font-size: 12px; padding: 3px 10px; border-radius: 4px;
  border: 1px solid #c9d1d9; background: var(--panel); cursor: pointer; }
[hidden] { display: none !important; }
@media (max-width: 700px) {
  main { padding: 10px; }
  .chart-grid { grid-template-columns: 1fr; }
}
`;
