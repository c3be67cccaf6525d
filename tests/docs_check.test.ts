/**
 * The docs checker (`npm run docs:check`): sessions are parsed from Markdown, run, and compared
 * with what the page shows; a page whose shown output drifts from the program fails.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { checkPage, checkShownFiles, matches, normalise, parsePage } from "./docs/docs_check.ts";
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";

const PAGE = `# A page

<!-- docs:check dir=/tmp/page -->

\`\`\`
$ echo "hello from $PWD"
hello from /tmp/page
$ printf 'a\\nb\\nc\\n'; echo took 12.5 s
a
...
took 3 s
\`\`\`

\`\`\`js
not a session
\`\`\`
`;

describe("docs:check", () => {
  it("parses a page's sessions, with the line each command is on", () => {
    const page = parsePage("page.md", PAGE);
    assert.equal(page.dir, "/tmp/page");
    assert.ok(page.checked);
    assert.deepEqual(page.commands.map((c) => [c.line, c.command, c.expected]), [
      [6, `echo "hello from $PWD"`, ["hello from /tmp/page"]],
      [8, "printf 'a\\nb\\nc\\n'; echo took 12.5 s", ["a", "...", "took 3 s"]],
    ]);
  });

  it("matches with ... for lines, {n} for numbers, {*} for text; masks durations and ids", () => {
    assert.ok(matches(["a", "...", "z"], ["a", "b", "c", "z"]));
    assert.ok(matches(["a", "...", "z"], ["a", "z"]));
    assert.ok(!matches(["a", "z"], ["a", "b", "z"]));
    assert.ok(matches(["resumed, {n}/6 done ({*})"], ["resumed, 2/6 done (in 3 s)"]));
    assert.ok(!matches(["resumed, {n}/6"], ["resumed, two/6"]));
    assert.equal(
      normalise("run 3f2b8c1e-0d4e-4a7b-9c1d-2e3f4a5b6c7d took 1.5 s, 22 B, pid 77", "h"),
      "run <uuid> took <duration>, <size>, pid <pid>",
    );
  });

  it("passes a page that shows what the commands print, and fails one that drifts", () => {
    // The folder a page runs in is written as the folder it shows (/tmp/page).
    assert.deepEqual(checkPage(parsePage("page.md", PAGE)), []);
    const drifted = parsePage("page.md", PAGE.replace("took 3 s", "took 3 s\nand more"));
    const found = checkPage(drifted);
    assert.equal(found.length, 1);
    assert.match(found[0]!, /page\.md:8: \$ printf[\s\S]*--- the page shows[\s\S]*and more/);
  });

  it("checks that a code block naming a file of examples/ shows that file exactly", () => {
    const file = "examples/tour/grown.mjs";
    const text = fs.readFileSync(path.join(REPO_ROOT, file), "utf8");
    assert.deepEqual(checkShownFiles("page.md", "```js\n" + text + "```\n"), []);
    assert.deepEqual(checkShownFiles("page.md", "```js\n" + text.replace("95", "96") + "```\n"), [
      "page.md: the code block that shows examples/tour/grown.mjs is not that file",
    ]);
  });
});
