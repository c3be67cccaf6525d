/**
 * `npm run docs:check`: every shell session shown in README.md and docs/guide/*.md is run, and
 * what it prints must be what the page shows, so that a page cannot drift from the program.
 *
 * A session is a fenced block whose first line starts with `$ `: each `$ ` line is a command
 * (run by bash, stdout and stderr together), the lines after it until the next command are what
 * it prints. A page's sessions run in order in one fresh folder holding a copy of examples/ (and
 * tests/fixtures, linked),
 * with `blockwise` on PATH (these sources, under Bun); `<!-- docs:check dir=/tmp/x -->` on the
 * page names the folder the page shows, and the real one is written so in what is compared.
 *
 * A page is checked once it carries the directive (README.md always); the others are listed as
 * not checked yet, so that none is forgotten.
 *
 * Compared with times, durations, sizes, ids, pids, ports and the host name masked on both
 * sides. In what a page shows, `{n}` stands for any whole number, `{*}` for any text within a
 * line, and a line `...` for any number of lines.
 */

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** One `$ ` command and what the page shows it prints. */
export interface DocCommand {
  readonly line: number;
  readonly command: string;
  readonly expected: readonly string[];
  /** The indent of its block (a block in a list item). */
  readonly indent: number;
}

/** A page's sessions, in order, and the folder it shows. */
export interface DocPage {
  readonly file: string;
  readonly dir: string;
  /** The page asks to be checked (`<!-- docs:check dir=... -->`). */
  readonly checked: boolean;
  /** `in=repo`: the sessions run in the repository itself (compile.sh), not a scratch folder. */
  readonly inRepo: boolean;
  readonly commands: readonly DocCommand[];
}

/** The sessions of a Markdown page. */
export function parsePage(file: string, text: string): DocPage {
  const lines = text.split("\n");
  const directive = /<!-- docs:check dir=(\S+)( in=repo)? -->/.exec(text);
  const dir = directive?.[1] ?? "/tmp/blockwise-docs";
  const commands: DocCommand[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^( *)```/.exec(lines[i]!);
    if (fence === null) continue;
    // A fence may be indented (in a list item): its lines lose that indent.
    const indent = fence[1]!.length;
    const start = i;
    let end = i + 1;
    while (end < lines.length && !/^ *```/.test(lines[end]!)) end++;
    const body = lines.slice(start + 1, end).map((l) =>
      l.slice(Math.min(indent, l.search(/\S|$/)))
    );
    i = end;
    if (!body[0]?.startsWith("$ ")) continue;
    let current: { line: number; command: string; expected: string[]; indent: number } | null =
      null;
    body.forEach((l, k) => {
      if (l.startsWith("$ ")) {
        if (current !== null) commands.push(current);
        current = { line: start + 2 + k, command: l.slice(2), expected: [], indent };
      } else current!.expected.push(l);
    });
    if (current !== null) commands.push(current);
  }
  return { file, dir, checked: directive !== null, inRepo: directive?.[2] !== undefined, commands };
}

/** Masks what changes from run to run; applied to both sides. */
export function normalise(text: string, host: string = os.hostname()): string {
  return text
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[0-9;]*m/g, "")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
    .replace(/\b\d+(\.\d+)? ?(ms|s|min|h)\b/g, "<duration>")
    .replace(/\b\d+(\.\d+)? ?(B|KB|MB|GB|TB|KiB|MiB|GiB)\b/g, "<size>")
    .replace(/\bpid \d+/g, "pid <pid>")
    .replace(/\[blockwise (python )?worker \d+\]/g, "[blockwise $1worker <pid>]")
    .replace(/(127\.0\.0\.1|0\.0\.0\.0|localhost):\d+/g, "$1:<port>")
    .split(host).join("<host>")
    .split("\n").map((l) => l.trimEnd()).join("\n");
}

function lineMatcher(expected: string): RegExp {
  const parts = expected.split(/(\{n\}|\{\*\})/).map((p) =>
    p === "{n}" ? "(?:\\d+|<\\w+>)" : p === "{*}" ? ".*" : p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  );
  return new RegExp(`^${parts.join("")}$`);
}

/** Whether `actual` lines are what `expected` shows (with `...` lines and placeholders). */
export function matches(expected: readonly string[], actual: readonly string[]): boolean {
  const memo = new Map<string, boolean>();
  const go = (e: number, a: number): boolean => {
    const key = `${e},${a}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let result: boolean;
    if (e === expected.length) result = a === actual.length;
    else if (expected[e] === "...") result = go(e + 1, a) || (a < actual.length && go(e, a + 1));
    else {result = a < actual.length && lineMatcher(expected[e]!).test(actual[a]!) &&
        go(e + 1, a + 1);}
    memo.set(key, result);
    return result;
  };
  return go(0, 0);
}

function trimBlank(lines: string[]): string[] {
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** What a run printed, as a page shows it: the resource tables (figures of this machine) as `...`. */
export function asShown(raw: string): string[] {
  const lines = trimBlank(raw.split("\n").map((l) => l.trimEnd()));
  const start = lines.indexOf("Resource utilization");
  if (start < 0) return lines;
  let end = start;
  while (end < lines.length && lines[end] !== "Execution summary") end++;
  return [...lines.slice(0, start), "...", ...lines.slice(end)];
}

/** Runs a page's commands in a fresh folder; returns the failures, described. */
export function checkPage(page: DocPage, printed?: Map<number, string>): string[] {
  if (page.commands.length === 0) return [];
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-docs-"));
  const bin = path.join(scratch, ".bin");
  fs.mkdirSync(bin);
  const bun = path.join(REPO, "node_modules", ".bin", "bun");
  fs.writeFileSync(
    path.join(bin, "blockwise"),
    `#!/bin/sh\nexec "${bun}" "${path.join(REPO, "main.ts")}" "$@"\n`,
    { mode: 0o755 },
  );
  const work = path.join(scratch, "work");
  fs.cpSync(path.join(REPO, "examples"), path.join(work, "examples"), { recursive: true });
  // Test fixtures the guide names (tests/fixtures/masks/...), as they are in the repository.
  fs.mkdirSync(path.join(work, "tests"));
  fs.symlinkSync(path.join(REPO, "tests", "fixtures"), path.join(work, "tests", "fixtures"));
  const marker = `@@docs-check-${process.pid}@@`;
  const script = page.commands.map((c, i) => `printf '%s\\n' '${marker}${i}'\n${c.command} 2>&1`)
    .join("\n");
  const cwd = page.inRepo ? REPO.replace(/\/$/, "") : work;
  const run = spawnSync("bash", ["-c", script], {
    cwd,
    encoding: "utf8",
    env: {
      ...process.env,
      PATH: `${bin}:${process.env["PATH"]}`,
      // Python pages import the checkout's package, as the wheel would install it; its binary
      // is the `blockwise` on PATH above.
      PYTHONPATH: path.join(REPO, "python"),
      NO_COLOR: "1",
      TZ: "UTC",
    },
    timeout: 600_000,
    maxBuffer: 64 << 20,
  });
  fs.rmSync(scratch, { recursive: true, force: true });
  const output = (run.stdout ?? "").split(cwd).join(page.dir);
  const pieces = output.split(new RegExp(`^${marker}(\\d+)\\n`, "m"));
  const actual = new Map<number, string>();
  for (let k = 1; k < pieces.length; k += 2) actual.set(Number(pieces[k]), pieces[k + 1] ?? "");
  const failures: string[] = [];
  page.commands.forEach((c, i) => {
    printed?.set(c.line, actual.get(i) ?? "");
    const got = trimBlank(normalise(actual.get(i) ?? "").split("\n"));
    const want = trimBlank(normalise(c.expected.join("\n")).split("\n"));
    if (matches(want, got)) return;
    failures.push(
      `${page.file}:${c.line}: $ ${c.command}\n--- the page shows\n${
        want.join("\n")
      }\n--- it printed\n${got.join("\n")}`,
    );
  });
  return failures;
}

/**
 * Code blocks that show a file of examples/ (their first line names it: `// examples/x.mjs: ...`)
 * must show it exactly; returns the ones that differ, described.
 */
export function checkShownFiles(file: string, text: string): string[] {
  const failures: string[] = [];
  const blocks = text.matchAll(/^```\w*\n((?:\/\/|#) (examples\/[\w./-]+?):?[ \n][\s\S]*?)^```$/gm);
  for (const [, body, shown] of blocks) {
    const real = path.join(REPO, shown!);
    const actual = fs.existsSync(real) ? fs.readFileSync(real, "utf8") : null;
    if (actual !== body) {
      failures.push(
        `${file}: the code block that shows ${shown} is not that file${
          actual === null ? " (it does not exist)" : ""
        }`,
      );
    }
  }
  return failures;
}

/** The pages checked: README.md and the guide. */
export function docPages(): string[] {
  const guide = path.join(REPO, "docs", "guide");
  return [
    path.join(REPO, "README.md"),
    ...fs.readdirSync(guide).filter((f) => f.endsWith(".md")).sort().map((f) =>
      path.join(guide, f)
    ),
  ];
}

function updatePage(file: string, page: DocPage, printed: Map<number, string>): void {
  const lines = fs.readFileSync(file, "utf8").split("\n");
  // From the end, so that the line numbers before stay right.
  for (const c of [...page.commands].reverse()) {
    const text = printed.get(c.line);
    if (text === undefined) continue;
    const shown = asShown(text).map((l) => (l === "" ? l : " ".repeat(c.indent) + l));
    lines.splice(c.line, c.expected.length, ...shown);
  }
  fs.writeFileSync(file, lines.join("\n"));
}

if (import.meta.main) {
  const only = process.argv.slice(2);
  let commands = 0;
  const failures: string[] = [];
  const unchecked: string[] = [];
  const files = docPages().filter((f) => only.length === 0 || only.some((o) => f.endsWith(o)));
  for (const file of files) {
    const page = parsePage(path.relative(REPO, file), fs.readFileSync(file, "utf8"));
    if (!page.checked) {
      if (page.commands.length > 0) unchecked.push(`${page.file} (${page.commands.length})`);
      continue;
    }
    commands += page.commands.length;
    failures.push(...checkShownFiles(page.file, fs.readFileSync(file, "utf8")));
    const printed = new Map<number, string>();
    const found = checkPage(page, printed);
    failures.push(...found);
    // For writing a page: DOCS_CHECK_UPDATE=1 puts what each differing command printed in it.
    if (found.length > 0 && process.env["DOCS_CHECK_UPDATE"] === "1") {
      updatePage(file, page, printed);
    }
  }
  for (const f of failures) process.stderr.write(`${f}\n\n`);
  if (unchecked.length > 0) {
    process.stdout.write(`docs:check: not checked yet (commands): ${unchecked.join(", ")}\n`);
  }
  process.stdout.write(
    `docs:check: ${commands} commands in ${
      files.length - unchecked.length
    } pages, ${failures.length} differ\n`,
  );
  process.exit(failures.length === 0 ? 0 : 1);
}
