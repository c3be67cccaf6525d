/**
 * Writes lib/remote/python_client_source.ts from blockwise_worker.py and the geometry module it
 * imports (python/blockwise/geometry.py, the Python package's own: blocks' ROIs are its Roi), so
 * the Python client travels inside the compiled binary and works the same under Deno (no text
 * imports needed). Run it after every change of either file: `bun workers/python/embed.ts`
 * (tests/python_client.test.ts fails while they differ).
 */

import * as fs from "node:fs";
import { fileURLToPath } from "node:url";

const source = fileURLToPath(new URL("./blockwise_worker.py", import.meta.url));
const geometrySource = fileURLToPath(
  new URL("../../python/blockwise/geometry.py", import.meta.url),
);
const target = fileURLToPath(
  new URL("../../lib/remote/python_client_source.ts", import.meta.url),
);

/**
 * `text` as one JavaScript string literal, quoted the way `deno fmt` keeps it (double quotes
 * unless the text holds more of them than single quotes).
 */
function literal(text: string): string {
  const doubles = text.split('"').length;
  const singles = text.split("'").length;
  const quote = doubles > singles ? "'" : '"';
  let escaped = "";
  for (const c of text) {
    const code = c.charCodeAt(0);
    if (c === "\\") escaped += "\\\\";
    else if (c === "\n") escaped += "\\n";
    else if (c === "\t") escaped += "\\t";
    else if (c === quote) escaped += `\\${c}`;
    else if (code < 0x20 || code === 0x2028 || code === 0x2029) {
      escaped += `\\u${code.toString(16).padStart(4, "0")}`;
    } else escaped += c;
  }
  return quote + escaped + quote;
}

/** The generated module's text for the client's source `text` and the geometry module's. */
export function embeddedModule(text: string, geometry: string): string {
  return `// Generated from workers/python/blockwise_worker.py and python/blockwise/geometry.py by
// \`bun workers/python/embed.ts\`: do not edit; change the .py files and run the script again.

/** The Python client's source (\`blockwise worker --python-client\` prints it). */
export const PYTHON_CLIENT_SOURCE: string =
  ${literal(text)};

/**
 * blockwise's geometry module (python/blockwise/geometry.py), written beside the client as
 * blockwise_geometry.py: the Roi and Coordinate of blocks' ROIs.
 */
export const PYTHON_GEOMETRY_SOURCE: string =
  ${literal(geometry)};
`;
}

if (import.meta.main) {
  fs.writeFileSync(
    target,
    embeddedModule(fs.readFileSync(source, "utf8"), fs.readFileSync(geometrySource, "utf8")),
  );
  console.log(`wrote ${target}`);
}
