/**
 * The Python package from its wheel, as a user installs it: python/build_wheel.py writes a wheel
 * with the package's files, the binary as its `blockwise` script and a RECORD that holds, tagged
 * for each compile.sh target; the wheel (with a stand-in binary running these sources) installs
 * with `pip install --no-index` into a fresh venv of Debian's python3, where `blockwise` runs
 * and `import blockwise.daisy` is the installed package; and the project's Python tests
 * (tests/python/) pass with that venv's python and pytest.
 *
 * Without /usr/bin/python3, its venv module or pytest, the venv tests are skipped with the
 * reason, unless BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 (CI), where that is a failure.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import { PYTHON, pythonMissing } from "./fixtures/python_peer.ts";
import {
  buildWheel,
  packageVenv,
  REQUIRE_PYTHON_PACKAGE,
  sourceBinary,
  venvMissing,
} from "./fixtures/python_venv.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("pywheel");
const VERSION = (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
}).version;
const TESTS = path.join(REPO_ROOT, "tests", "python");

const noPython = pythonMissing();
const noVenv = venvMissing();
if (noVenv !== null && !REQUIRE_PYTHON_PACKAGE) {
  console.log(`python_package.test.ts: the venv tests are skipped: ${noVenv}`);
}
const WHEEL = { timeout: 120_000, ...(noPython === null ? {} : { skip: noPython }) };
const VENV = {
  timeout: 300_000,
  ...(noVenv === null || REQUIRE_PYTHON_PACKAGE
    ? {}
    : { skip: `skipped: ${noVenv} (BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 makes this a failure)` }),
};

/** The venv, or a failure saying why there is none (CI requires one). */
function venv() {
  if (noVenv !== null) assert.fail(`BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 but ${noVenv}`);
  return packageVenv();
}

interface WheelContents {
  /** Entry name -> Unix mode. */
  readonly modes: Record<string, number>;
  readonly metadata: string;
  readonly wheel: string;
  /** RECORD rows whose hash or size is not the entry's, and entries RECORD misses. */
  readonly recordErrors: string[];
}

/** A wheel's entries, read with Python's zipfile (and its RECORD checked against them). */
function contents(wheel: string): WheelContents {
  const script = `
import base64, csv, hashlib, io, json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
info = [n for n in names if n.endswith(".dist-info/RECORD")][0][: -len("RECORD")]
errors, seen = [], set()
for row in csv.reader(io.StringIO(z.read(info + "RECORD").decode())):
    seen.add(row[0])
    if row[0] == info + "RECORD":
        continue
    data = z.read(row[0])
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if row[1] != "sha256=" + digest or row[2] != str(len(data)):
        errors.append("%s: RECORD says %s %s" % (row[0], row[1], row[2]))
errors += ["%s: not in RECORD" % n for n in names if n not in seen]
print(json.dumps({
    "modes": {i.filename: i.external_attr >> 16 for i in z.infolist()},
    "metadata": z.read(info + "METADATA").decode(),
    "wheel": z.read(info + "WHEEL").decode(),
    "recordErrors": errors,
}))
`;
  const r = spawnSync(PYTHON, ["-c", script, wheel], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as WheelContents;
}

/** The last lines of what a process printed, for a failure message. */
function tail(r: { stdout: string | null; stderr: string | null }, lines = 60): string {
  return `${r.stdout ?? ""}${r.stderr ?? ""}`.trimEnd().split("\n").slice(-lines).join("\n");
}

describe("blockwise's Python wheel", () => {
  it(
    "python/build_wheel.py: the package, the binary as an executable script, a RECORD that holds, each target's tag",
    WHEEL,
    () => {
      const dir = newDir("build");
      const pkg = path.join(dir, "src", "blockwise");
      fs.mkdirSync(path.join(pkg, "daisy", "__pycache__"), { recursive: true });
      fs.writeFileSync(path.join(pkg, "__init__.py"), "");
      fs.writeFileSync(path.join(pkg, "py.typed"), "");
      fs.writeFileSync(path.join(pkg, "notes.txt"), "not shipped\n");
      fs.writeFileSync(path.join(pkg, "daisy", "__init__.py"), "X = 1\n");
      fs.writeFileSync(path.join(pkg, "daisy", "__pycache__", "__init__.cpython-311.pyc"), "");
      const binary = sourceBinary(dir);
      const tags: Record<string, string> = {
        "linux-x64": "manylinux_2_17_x86_64.manylinux2014_x86_64",
        "linux-x64-baseline": "manylinux_2_17_x86_64.manylinux2014_x86_64",
        "linux-arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64",
        "linux-x64-musl": "musllinux_1_2_x86_64",
      };
      for (const [target, tag] of Object.entries(tags)) {
        const out = path.join(dir, target);
        const wheel = buildWheel(binary, out, { target, package: pkg, python: PYTHON });
        assert.equal(wheel, path.join(out, `blockwise-${VERSION}-py3-none-${tag}.whl`));
        const c = contents(wheel);
        assert.deepEqual(c.recordErrors, []);
        assert.deepEqual(c.modes, {
          "blockwise/__init__.py": 0o100644,
          "blockwise/daisy/__init__.py": 0o100644,
          "blockwise/py.typed": 0o100644,
          [`blockwise-${VERSION}.data/scripts/blockwise`]: 0o100755,
          [`blockwise-${VERSION}.dist-info/METADATA`]: 0o100644,
          [`blockwise-${VERSION}.dist-info/WHEEL`]: 0o100644,
          [`blockwise-${VERSION}.dist-info/RECORD`]: 0o100644,
        });
        assert.match(c.wheel, /^Wheel-Version: 1\.0$/m);
        assert.match(c.wheel, /^Root-Is-Purelib: false$/m);
        const wheelTags = [...c.wheel.matchAll(/^Tag: (.*)$/gm)].map((m) => m[1]);
        assert.deepEqual(wheelTags, tag.split(".").map((t) => `py3-none-${t}`));
        for (
          const line of [
            "Metadata-Version: 2.1",
            "Name: blockwise",
            `Version: ${VERSION}`,
            "Requires-Python: >=3.8",
          ]
        ) {
          assert.ok(
            c.metadata.split("\n").includes(line),
            `METADATA lacks ${line}:\n${c.metadata}`,
          );
        }
        assert.match(c.metadata, /^Summary: \S.*$/m);
      }
      // The same inputs give the same bytes (fixed timestamps, sorted entries).
      const again = buildWheel(binary, path.join(dir, "again"), { package: pkg, python: PYTHON });
      const first = path.join(dir, process.arch === "arm64" ? "linux-arm64" : "linux-x64");
      assert.deepEqual(
        fs.readFileSync(again),
        fs.readFileSync(path.join(first, path.basename(again))),
      );
    },
  );

  it(
    "installs offline into a fresh venv: `blockwise` runs from its bin/, `import blockwise.daisy` is the installed package",
    VENV,
    () => {
      const v = venv();
      const mode = fs.statSync(v.blockwise).mode;
      assert.ok(
        (mode & 0o111) !== 0,
        `${v.blockwise} is not executable (mode ${mode.toString(8)})`,
      );
      const version = spawnSync(v.blockwise, ["--version"], {
        encoding: "utf8",
        env: v.env(),
        timeout: 60_000,
      });
      assert.equal(version.status, 0, tail(version));
      assert.ok(version.stdout.startsWith(`blockwise ${VERSION} `), version.stdout);
      const script = `
import json, os, sys, sysconfig
import blockwise, blockwise.daisy
where = lambda m: m.__file__ and os.path.realpath(m.__file__)  # None: no __init__.py
print(json.dumps({"package": where(blockwise), "daisy": where(blockwise.daisy),
    "scripts": os.path.realpath(os.path.join(sysconfig.get_path("scripts"), "blockwise"))}))
`;
      const r = spawnSync(v.python, ["-c", script], {
        cwd: v.dir,
        encoding: "utf8",
        env: v.env(),
        timeout: 60_000,
      });
      assert.equal(r.status, 0, tail(r));
      const found = JSON.parse(r.stdout) as Record<"package" | "daisy" | "scripts", string | null>;
      const venvDir = fs.realpathSync(v.dir);
      for (const name of ["package", "daisy"] as const) {
        const file = found[name];
        assert.ok(file !== null, `blockwise${name === "daisy" ? ".daisy" : ""} has no __init__.py`);
        assert.ok(file.startsWith(venvDir + path.sep), `${file} is not the venv's (${venvDir})`);
      }
      // Where the package looks first for its binary: the scripts folder of its environment.
      assert.equal(found.scripts, fs.realpathSync(v.blockwise));
    },
  );

  it(
    "the project's Python tests (tests/python/) pass with the venv's python and pytest",
    VENV,
    () => {
      const v = venv();
      assert.ok(fs.existsSync(TESTS), `${TESTS} does not exist: the Python package has no tests`);
      const args = ["-m", "pytest", "-p", "no:cacheprovider", "-q"];
      // pytest-timeout (Debian's python3-pytest-timeout) turns a hung test into its traceback.
      const timeout = spawnSync(v.python, ["-c", "import pytest_timeout"], { env: v.env() });
      if (timeout.status === 0) args.push("--timeout=120");
      const r = spawnSync(v.python, [...args, TESTS], {
        cwd: TESTS,
        encoding: "utf8",
        env: v.env(),
        timeout: 290_000,
        maxBuffer: 64 << 20,
      });
      assert.notEqual(
        r.status,
        5,
        `pytest collected no tests in ${TESTS} (exit 5): the Python package's tests are missing\n${
          tail(r)
        }`,
      );
      assert.equal(
        r.status,
        0,
        `pytest ${TESTS} failed (exit ${r.status ?? r.signal}):\n${tail(r)}`,
      );
    },
  );
});
