import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { PIPELINE_DECLARATIONS } from "../lib/pipeline/declarations.ts";
import { typesText } from "../lib/cli/types.ts";
import { loadPipeline } from "../lib/pipeline/load.ts";
import { TASK_FIELDS } from "../lib/pipeline/validate.ts";

const REPO = fileURLToPath(new URL("..", import.meta.url));
const DENO = basename(process.execPath).startsWith("deno")
  ? process.execPath
  : join(REPO, "node_modules", ".bin", "deno");
const SLOW = { timeout: 120_000 };

const ROIS = `
      totalRoi: { offset: [0, 0], shape: [256, 256] },
      readRoi: { offset: [-8, -8], shape: [80, 80] },
      writeRoi: { offset: [0, 0], shape: [64, 64] },`;

function pipelineSource(extract: string): string {
  return `import type { Block, Pipeline, Task } from "./blockwise.d.ts";

interface Model {
  threshold: number;
}

const relabel: Task<Model> = {
  id: "relabel",
  upstream: ["extract"],${ROIS}
  setup(): Model {
    return { threshold: 0.5 };
  },
  process(block, model) {
    if (model.threshold > 1) throw new Error(\`block \${block.id} of \${block.taskId}\`);
  },
};

export default {
  tasks: [
    {
      id: "extract",${ROIS}
      ${extract}
      readWriteConflict: true,
      maxWorkers: 2,
      maxRetries: 2,
      maxWorkerRestarts: 4,
      timeout: 600,
      requires: { cpu: 1 },
      async process(block: Block): Promise<void> {
        await Promise.resolve(block.writeRoi.shape.length + block.attempt);
      },
      check(block) {
        return block.index.every((i) => i < 0);
      },
    },
    relabel,
    {
      id: "export",
      upstream: ["relabel"],${ROIS}
      command: ["python3", "export.py", "--offset", "{write_offset}", "--shape", "{write_shape}"],
      cwd: "exports",
      tracking: false,
      resourceTracking: true,
      skipMask: new Uint8Array(9),
    },
  ],
} satisfies Pipeline;
`;
}

function compatSource(specUrl: string): string {
  return `import type { Block, Pipeline, Task } from "../blockwise.d.ts";
import type { Block as SpecBlock, PipelineModule, TaskDefinition } from "${specUrl}";

export function taskToSpec(task: Task): TaskDefinition {
  return task;
}
export function taskFromSpec(task: TaskDefinition): Task {
  return task;
}
export function pipelineToSpec(pipeline: Pipeline): PipelineModule {
  return pipeline;
}
export function pipelineFromSpec(pipeline: PipelineModule): Pipeline {
  return pipeline;
}
export function blockToSpec(block: Block): SpecBlock {
  return block;
}
export function blockFromSpec(block: SpecBlock): Block {
  return block;
}
`;
}

/**
 * Checks, in both directions where a user's values cross, that code typed with the declared
 * helpers calls the real ones: what the real ones return fits the declared types, and what the
 * declared parameters accept fits the real parameters.
 */
function helperCompatSource(helpersUrl: string): string {
  return `import type * as declared from "../blockwise.d.ts";
import * as real from "${helpersUrl}";

export async function returns(path: string, block: declared.Block): Promise<void> {
  const array: declared.ZarrArray = await real.openArray(path);
  const chunk: declared.NumericChunk = await real.readBlock(
    array as real.ZarrArray,
    block,
    {} as declared.ReadOptions,
  );
  const padded: declared.NumericChunk = await real.readRoi(array as real.ZarrArray, block.readRoi);
  const slices: declared.Slice[] = real.roiSelection(block.readRoi, {} as declared.Placement);
  const written: Promise<void> = real.writeBlock(
    array as real.ZarrArray,
    block,
    chunk as declared.NumericChunk,
    {} as declared.Placement,
  );
  void padded;
  void slices;
  await written;
}

export function parameters(
  options: declared.ReadOptions,
  chunk: declared.NumericChunk,
  data: declared.NumericArray,
  block: Pick<declared.Block, "readRoi" | "writeRoi">,
): void {
  const o: real.ReadOptions = options;
  const c: real.NumericChunk = chunk;
  const d: real.NumericArray = data;
  const b: real.BlockRois = block;
  const back: declared.NumericChunk = c;
  void [o, d, b, back];
}

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const sameNames: Same<
  keyof typeof real,
  "openArray" | "readBlock" | "readRoi" | "roiSelection" | "writeBlock"
> = true;
`;
}

/** A folder `name` in `dir` whose deno.json has the repository's strict compiler options. */
function strictFolder(dir: string, name: string): string {
  const folder = join(dir, name);
  mkdirSync(folder);
  const config = JSON.parse(readFileSync(join(REPO, "deno.json"), "utf8")) as {
    compilerOptions: unknown;
  };
  writeFileSync(
    join(folder, "deno.json"),
    JSON.stringify({ compilerOptions: config.compilerOptions, nodeModulesDir: "manual" }),
  );
  return folder;
}

interface CheckResult {
  status: number | null;
  output: string;
}

function denoCheck(dir: string, file: string): CheckResult {
  const result = spawnSync(DENO, ["check", "--quiet", "--config", "deno.json", file], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1" },
  });
  if (result.error !== undefined) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe("PIPELINE_DECLARATIONS", () => {
  const dir = mkdtempSync(join(tmpdir(), "blockwise-types-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "deno.json"), "{}\n");
  writeFileSync(join(dir, "blockwise.d.ts"), typesText());
  writeFileSync(join(dir, "pipeline.ts"), pipelineSource(`fit: "shrink",`));
  writeFileSync(join(dir, "bad_fit.ts"), pipelineSource(`fit: "bogus",`));
  writeFileSync(join(dir, "bad_field.ts"), pipelineSource(`maxWorker: 2,`));

  it("is standalone and exports the pipeline types", () => {
    assert.doesNotMatch(PIPELINE_DECLARATIONS, /^\s*import\s/m);
    for (const name of ["interface Roi", "interface Block", "interface Task<Context = unknown>"]) {
      assert.ok(PIPELINE_DECLARATIONS.includes(`export ${name}`), name);
    }
    assert.ok(PIPELINE_DECLARATIONS.includes("export interface Pipeline"));
    assert.ok(PIPELINE_DECLARATIONS.includes(`export type Fit = "valid" | "overhang" | "shrink"`));
  });

  it("documents every task field", () => {
    for (const field of TASK_FIELDS) {
      const declaration = new RegExp(`\\*/\\n  ${field}\\??[:(]`);
      assert.match(PIPELINE_DECLARATIONS, declaration, `field ${field} lacks a doc comment`);
    }
  });

  it("documents the command placeholders and environment variables", () => {
    const placeholders = ["task_id", "block_id", "index", "read_offset", "read_shape"];
    for (const name of [...placeholders, "write_offset", "write_shape"]) {
      assert.ok(PIPELINE_DECLARATIONS.includes(`{${name}}`), name);
      assert.ok(PIPELINE_DECLARATIONS.includes(`BLOCKWISE_${name.toUpperCase()}`), name);
    }
    assert.ok(PIPELINE_DECLARATIONS.includes("BLOCKWISE_ATTEMPT"));
    assert.ok(PIPELINE_DECLARATIONS.includes(`"0,64,128"`));
  });

  it("type-checks a pipeline using process, setup, command and check", SLOW, () => {
    const result = denoCheck(dir, "pipeline.ts");
    assert.equal(result.status, 0, result.output);
  });

  it("rejects an unknown fit mode", SLOW, () => {
    const result = denoCheck(dir, "bad_fit.ts");
    assert.notEqual(result.status, 0, "deno check accepted fit: bogus");
    assert.match(result.output, /bogus/);
  });

  it("rejects a misspelled field", SLOW, () => {
    const result = denoCheck(dir, "bad_field.ts");
    assert.notEqual(result.status, 0, "deno check accepted maxWorker");
    assert.match(result.output, /maxWorker/);
  });

  it(
    "is assignment-compatible with TaskDefinition under the repository's strict options",
    SLOW,
    () => {
      const compat = strictFolder(dir, "compat");
      const specUrl = pathToFileURL(join(REPO, "lib", "pipeline", "spec.ts")).href;
      writeFileSync(join(compat, "compat.ts"), compatSource(specUrl));
      const result = denoCheck(compat, "compat.ts");
      assert.equal(result.status, 0, result.output);
    },
  );

  it("declares the blockwise helper module as lib/helpers implements it", SLOW, () => {
    const compat = strictFolder(dir, "helpers_compat");
    // lib/helpers reaches node:zlib (the Zarr codecs), whose types Deno takes from @types/node
    // in the checking folder's node_modules.
    symlinkSync(join(REPO, "node_modules"), join(compat, "node_modules"));
    const helpersUrl = pathToFileURL(join(REPO, "lib", "helpers", "mod.ts")).href;
    writeFileSync(join(compat, "compat.ts"), helperCompatSource(helpersUrl));
    const result = denoCheck(compat, "compat.ts");
    assert.equal(result.status, 0, result.output);
  });

  it("describes a pipeline that loadPipeline accepts", async () => {
    const config = await loadPipeline(join(dir, "pipeline.ts"));
    assert.deepEqual(config.tasks.map((t) => t.id), ["extract", "relabel", "export"]);
    const [extract, relabel, exporter] = config.tasks;
    assert.equal(extract!.layout.fit, "shrink");
    assert.equal(typeof extract!.check, "function");
    assert.ok(relabel?.kind === "process");
    assert.equal(typeof relabel.setup, "function");
    assert.deepEqual(relabel!.upstream, ["extract"]);
    assert.ok(exporter?.kind === "command");
    assert.equal(exporter.command[0], "python3");
    assert.equal(exporter.cwd, join(dir, "exports"));
    assert.equal(exporter!.tracking, false);
  });
});

describe("examples/blockwise.d.ts", () => {
  it("is exactly what `blockwise types` prints (regenerate it with ./blockwise types)", () => {
    const example = readFileSync(new URL("../examples/blockwise.d.ts", import.meta.url), "utf8");
    assert.equal(example, typesText());
  });
});
