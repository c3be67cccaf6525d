/**
 * Build targets (compile.sh) and `--version`, the parts that need no binary: compile.sh's
 * refusals, the runtime pins in package.json, the version line of a source run, and the build
 * target baked in by `bun build --define`. Building and running the binaries is .ci/binaries.
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { buildTarget, VERSION, versionLine } from "../lib/version.ts";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";

const TARGETS = ["linux-x64", "linux-x64-baseline", "linux-arm64", "linux-x64-musl"];
const newDir = scratchDirs("build-");

interface Pin {
  readonly package: string;
  readonly version: string;
  readonly integrity: string;
}

interface PackageJson {
  version: string;
  devDependencies: Record<string, string>;
  bunRuntimes: Record<string, Pin>;
}

function readJson<T>(file: string): T {
  return JSON.parse(fs.readFileSync(file, "utf8")) as T;
}

const packageJson = readJson<PackageJson>(path.join(REPO_ROOT, "package.json"));

interface Exit {
  readonly code: number | null;
  readonly stderr: string;
}

function compile(args: readonly string[], root = REPO_ROOT): Exit {
  const r = spawnSync("bash", [path.join(root, "compile.sh"), ...args], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, stderr: r.stderr };
}

/**
 * A checkout of compile.sh with its own package.json (changed by `edit`), sharing the real
 * node_modules, so compile.sh's checks can be driven without touching the repository.
 */
function checkoutWith(edit: (p: PackageJson) => void): string {
  const dir = newDir("checkout");
  fs.copyFileSync(path.join(REPO_ROOT, "compile.sh"), path.join(dir, "compile.sh"));
  const copy = structuredClone(packageJson);
  edit(copy);
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify(copy, null, 2));
  fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(dir, "node_modules"));
  return dir;
}

describe("compile.sh refuses what it cannot build", () => {
  for (const args of [["--target", "linux-mips"], ["--target=linux-mips"]]) {
    it(`${args.join(" ")}: exit 2, names the value and lists every target`, () => {
      const r = compile(args);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /unknown target 'linux-mips'/);
      for (const t of TARGETS) assert.ok(r.stderr.includes(t), `${t} missing from: ${r.stderr}`);
    });
  }

  it("--target without a value: exit 2 with the usage", () => {
    const r = compile(["--target"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--target needs a value/);
    assert.match(r.stderr, /usage: \.\/compile\.sh/);
  });

  it("an unknown argument: exit 2, naming it", () => {
    const r = compile(["--arm"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /unknown argument '--arm'/);
  });

  it("--deno: exit 2, explaining why there is no Deno binary", () => {
    const r = compile(["--deno"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /deno compile/);
  });

  it("a runtime pinned for another Bun than the compiler: exit 1, saying what to pin", () => {
    const dir = checkoutWith((p) => {
      p.bunRuntimes["linux-arm64"] = { ...p.bunRuntimes["linux-arm64"]!, version: "0.0.1" };
    });
    const r = compile(["--target", "linux-arm64"], dir);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /@oven\/bun-linux-aarch64@0\.0\.1 does not match/);
    assert.ok(r.stderr.includes(packageJson.devDependencies["bun"]!), r.stderr);
    assert.ok(!fs.existsSync(path.join(dir, "dist")), "nothing may be built");
  });

  it("a runtime tarball whose integrity is not the pinned one: exit 1, and it is removed", () => {
    const pin = packageJson.bunRuntimes["linux-arm64"]!;
    const dir = checkoutWith(() => {});
    const cache = path.join(dir, ".cache", "bun-runtimes");
    fs.mkdirSync(cache, { recursive: true });
    const tarball = path.join(cache, `oven-bun-linux-aarch64-${pin.version}.tgz`);
    fs.writeFileSync(tarball, "not the runtime");
    const r = compile(["--target", "linux-arm64"], dir);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /has integrity sha512-\S+ but package\.json pins/);
    assert.ok(r.stderr.includes(pin.integrity), r.stderr);
    assert.ok(!fs.existsSync(tarball), "the bad tarball must not be used again");
    assert.ok(!fs.existsSync(path.join(dir, "dist", "blockwise-linux-arm64")));
  });
});

describe("the runtime pins in package.json", () => {
  const lock = readJson<{ packages: Record<string, { version?: string; integrity?: string }> }>(
    path.join(REPO_ROOT, "package-lock.json"),
  );

  it("pin exactly the documented targets", () => {
    assert.deepEqual(Object.keys(packageJson.bunRuntimes), TARGETS);
  });

  for (const target of TARGETS) {
    it(`${target}: an @oven runtime of the Bun that compiles, with its integrity`, () => {
      const pin = packageJson.bunRuntimes[target]!;
      assert.match(pin.package, /^@oven\/bun-linux-/);
      assert.equal(pin.version, packageJson.devDependencies["bun"]);
      assert.match(pin.integrity, /^sha512-[A-Za-z0-9+/]{86}==$/);
      // npm verified the lockfile's integrity when it installed; a pin must not disagree.
      const locked = lock.packages[`node_modules/${pin.package}`];
      if (locked?.version === pin.version) assert.equal(pin.integrity, locked.integrity);
    });
  }
});

describe("blockwise --version", () => {
  it("in a source run names the runtime, its version and the host", () => {
    const versions = process.versions as Record<string, string | undefined>;
    const runtime = versions["bun"] !== undefined
      ? `bun ${versions["bun"]}`
      : versions["deno"] !== undefined
      ? `deno ${versions["deno"]}`
      : `node ${versions["node"]}`;
    assert.equal(buildTarget(), null);
    assert.equal(
      versionLine(),
      `blockwise ${VERSION} (${runtime}, source on ${process.platform}-${process.arch})`,
    );
  });

  it("keeps the release in step with package.json", () => {
    assert.equal(VERSION, packageJson.version);
  });

  it("reports the target that `bun build --define` baked in, not the host", async () => {
    const dir = newDir("define");
    const bundle = path.join(dir, "version.mjs");
    const bun = path.join(REPO_ROOT, "node_modules", ".bin", "bun");
    const r = spawnSync(bun, [
      "build",
      path.join(REPO_ROOT, "lib", "version.ts"),
      "--target=bun",
      "--define",
      'BLOCKWISE_BUILD_TARGET:"linux-arm64"',
      "--outfile",
      bundle,
    ], { encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const built = await import(pathToFileURL(bundle).href) as typeof import("../lib/version.ts");
    assert.equal(built.buildTarget(), "linux-arm64");
    assert.match(
      built.versionLine(),
      new RegExp(`^blockwise ${VERSION} \\(\\w+ \\S+, linux-arm64\\)$`),
    );
  });
});
