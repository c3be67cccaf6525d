import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bun = path.join(repo, "node_modules", ".bin", "bun");

describe("command output", () => {
  it("plan --blocks stops quietly when the reader closes the pipe (| head)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-pipe-"));
    const file = path.join(dir, "big.ts");
    fs.writeFileSync(
      file,
      `export default { tasks: [{ id: "big", totalRoi: { offset: [0, 0], shape: [1000, 1000] },
        readRoi: { offset: [0, 0], shape: [1, 1] }, writeRoi: { offset: [0, 0], shape: [1, 1] },
        process() {} }] };\n`,
    );
    const child = spawn(bun, [path.join(repo, "main.ts"), "plan", file, "--blocks", "--json"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const firstLine = await new Promise<string>((resolve) => {
      let text = "";
      child.stdout.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        if (text.includes("\n")) {
          child.stdout.destroy();
          resolve(text.split("\n")[0]!);
        }
      });
    });
    assert.equal(JSON.parse(firstLine).task, "big");
    const code = await Promise.race([
      new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c))),
      new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 20_000)),
    ]);
    if (code === "hung") child.kill("SIGKILL");
    assert.notEqual(code, "hung", "blockwise kept running after its output was closed");
    assert.equal(code, 0);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
