/** The command line: commander wiring and the one place errors become exit codes. */

import process from "node:process";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { versionLine } from "../version.ts";
import { carriedModulesLine } from "../pipeline/provided_modules.ts";
import { codecsLine } from "./codecs_line.ts";
import {
  EXIT_INTERNAL_ERROR,
  EXIT_INVALID_INPUT,
  exitCodeForError,
  fileSystemFailure,
} from "./exit_codes.ts";
import { OutputClosed } from "./output.ts";
import { planCommand, type PlanOptions } from "./plan.ts";
import { runCommand, type RunCommandOptions } from "./run.ts";
import {
  parseResourcesOption as parseResourceList,
  type ResourcesOption,
} from "../schedule/mod.ts";
import { InputError } from "../errors.ts";
import type { ReportOptions } from "./report.ts";
import { DEFAULT_REPORT_FILE } from "../view/report_data.ts";
import { demoCommand, type DemoOptions } from "./demo.ts";
import { typesCommand } from "./types.ts";
import { parseIndexOption, statusCommand, type StatusOptions } from "./status.ts";
import type { ServeOptions } from "./serve.ts";
import { DEFAULT_VIEW_LISTEN } from "../view/access.ts";
import { resetCommand, type ResetOptions } from "./reset.ts";
import { addMaskImportCommand } from "./mask.ts";
import { migrateCommand } from "./migrate.ts";
import { acceptCommand, type AcceptOptions } from "./accept.ts";
import { verifyCommand, type VerifyOptions } from "./verify.ts";
import { workerCommand, type WorkerCommandOptions } from "./worker.ts";
import { initCommand } from "./init.ts";
import { daisySessionCommand } from "./daisy_session.ts";

export function buildProgram(
  setExitCode: (code: number) => void,
  codecs: string | null = null,
): Command {
  const version = [versionLine(), carriedModulesLine(), ...(codecs === null ? [] : [codecs])]
    .join("\n");
  const program = new Command("blockwise")
    .description(
      "Resumable blockwise task scheduler for huge n-dimensional volumes.\n" +
        "Tiles each task's volume into blocks, runs them respecting their dependencies, and keeps a per-block ledger so a killed run resumes where it stopped.",
    )
    .version(version, "-V, --version", "print the blockwise version, runtime and build target")
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ outputError: (text, write) => write(text) });

  const sub = (name: string): Command =>
    program.command(name).version(
      version,
      "-V, --version",
      "print the blockwise version, runtime and build target",
    );

  sub("plan")
    .description("show what a run would do: tasks, block counts, levels and grids")
    .argument("<pipeline>", "pipeline file (.ts or .js) whose default export lists the tasks")
    .option("--json", "print machine-readable JSON (schema: docs/guide/json-outputs.md)")
    .option("--blocks", "list every block with its ROIs, level and upstream blocks")
    .option(
      "--skip-mask <task=file>",
      "show what a block-grid mask would skip; repeatable; wins over the task's skipMask",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      "--tracking-dir <dir>",
      "read the stores at <dir>/<task id> (read-only, no lock) and say why each block would run or not",
    )
    .option(
      "--force <task[:offset:shape]>",
      "as run --force: count these blocks as forced; repeatable",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      "--tasks <ids>",
      "plan only these tasks (comma-separated; repeatable) and the tasks upstream of them, not the others",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      "--resources <list>",
      "as run --resources: with gpu=0,1 (ids) or gpu=COUNT, say which worker gets which GPU",
      parseResourcesOption,
    )
    .action(async (pipeline: string, opts: WithResources<PlanOptions>) => {
      const { resources, ...rest } = opts;
      await planCommand(pipeline, { ...rest, gpu: resources?.gpu ?? null });
    });

  sub("run")
    .description("run every block of a pipeline")
    .argument("<pipeline>", "pipeline file (.ts or .js) whose default export lists the tasks")
    .option("--serial", "run every block in the main thread, one at a time (for debugging)")
    .option(
      "--resources <list>",
      "run-wide budget shared by all tasks' workers, e.g. cpu=8,gpu=1 (see a task's requires); a resource it does not name is not limited; GPUs by id, gpu=0,1,3, each local worker getting its own",
      parseResourcesOption,
    )
    .option(
      "--serve [host:port]",
      "serve a live dashboard of the run (needs --tracking-dir; default 127.0.0.1:8000, port 0 = any free port; any address but loopback puts a secret token in the URL)",
    )
    .option(
      "--events <file>",
      "write one JSON object per line for the run's start, task progress, failed attempts, notices and end",
    )
    .option(
      "--events-blocks",
      "with --events: also a block_done line per completed block (task, block, index, attempt, worker, wall time)",
    )
    .option("--no-progress", "no progress bars or periodic progress lines")
    .option(
      "--progress-interval <seconds>",
      "seconds between progress lines when stderr is not a terminal",
      parsePositiveNumber,
    )
    .option(
      "--log-dir <dir>",
      "write worker output to <dir>/<task>/worker_<n>.out|.err instead of the terminal",
    )
    .option(
      "--tracking-dir <dir>",
      "keep a resumable per-block ledger for every task at <dir>/<task id>",
    )
    .option(
      "--resource-tracking",
      "also record per-block wall/CPU time, peak RSS and I/O in the ledger (and GPU figures for tasks that require GPUs)",
    )
    .addOption(
      new Option("--tracking-io <mode>", "how tracking stores are read and written")
        .choices(["auto", "mmap", "fs"])
        .default("auto"),
    )
    .option("--verbose", "say which tracking store and I/O adapter each task uses")
    .option(
      "--skip-mask <task=file>",
      "skip the blocks a block-grid mask marks nonzero (.npy or Zarr); repeatable; wins over the task's skipMask",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--keep-temp", "keep the outputs of temporary tasks in this run (delete nothing)")
    .option(
      "--allow-empty",
      "run even when a task has no block (its volume is smaller than a block)",
    )
    .option(
      "--tasks <ids>",
      "run only these tasks (comma-separated; repeatable) and the tasks upstream of them, not the others",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      "--force <task[:offset:shape]>",
      "run these blocks whatever the ledger says (done, fresh or quarantined); repeatable",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      "--grace <seconds>",
      "after SIGINT/SIGTERM, how long blocks in flight may finish",
      parsePositiveNumber,
    )
    .addOption(
      new Option(
        "--launcher <kind>",
        "where every task's workers run: local (Web Workers here), slurm (SLURM jobs or job steps), command (the task's launch command), manual (workers join by hand)",
      ).choices(["local", "slurm", "command", "manual"]),
    )
    .option(
      "--listen <host:port>",
      "where remote workers connect (default 127.0.0.1 on a free port; 0.0.0.0:0 for workers on other nodes)",
    )
    .option(
      "--lease <seconds>",
      "how long a remote worker may stay silent (no heartbeat) before it counts as lost (default 15)",
      parsePositiveNumber,
    )
    .action(async (pipeline: string, opts: WithResources<RunCommandOptions>) => {
      const { resources, ...rest } = opts;
      setExitCode(
        await runCommand(
          pipeline,
          resources === undefined
            ? rest
            : { ...rest, resources: resources.counts, gpu: resources.gpu },
        ),
      );
    });

  sub("worker")
    .description(
      "serve one run as a remote worker (started by a run's launcher, which sets the secret and slot, or joining by hand with --secret-file)",
    )
    .option(
      "--connect <host:port>",
      "the scheduler's address (default: $BLOCKWISE_CONNECT)",
    )
    .option(
      "--secret-file <path>",
      "join a run by hand: the file with the run's secret (mode 0600), which the run prints",
    )
    .option(
      "--task <id>",
      'join this task (launch: "manual"); optional when the run has one such task',
    )
    .option(
      "--python-client",
      "print the Python client that runs Python tasks' workers (blockwise_worker.py, standard library only) and exit; it imports blockwise_geometry.py from its folder, or blockwise's installed Python package: --python-client-dir writes both",
    )
    .option(
      "--python-client-dir <dir>",
      "write the Python client's folder into DIR (blockwise-client-<sha>/ with blockwise_worker.py and the blockwise_geometry.py it imports), print the path of its blockwise_worker.py and exit",
    )
    .action(async (opts: WorkerCommandOptions) => {
      setExitCode(await workerCommand(opts));
    });

  program.command("daisy-session", { hidden: true })
    .description(
      "serve the Python package's daisy API: JSON lines on stdin and stdout (docs/design/DAISY_API.md)",
    )
    .action(async () => {
      setExitCode(await daisySessionCommand());
    });

  sub("status")
    .description("show what tracking stores recorded: done, failed and pending blocks, runs, lock")
    .argument("<path>", "one task's tracking store, or a tracking directory (all its stores)")
    .option("--json", "print machine-readable JSON (schema: docs/guide/json-outputs.md)")
    .option("--map", "draw each task's block grid: done, failed and pending blocks")
    .option(
      "--axis <axis>",
      "with --map: the axis to project along or slice (default 0)",
      parseIndexOption,
    )
    .option("--slice <index>", "with --map: show only this slice along --axis", parseIndexOption)
    .option("--failed", "list every failed block with its attempts and last error (errors.jsonl)")
    .action(async (target: string, opts: StatusOptions) => {
      setExitCode(await statusCommand(target, opts));
    });

  sub("serve")
    .description(
      "serve a live dashboard of tracking stores, their status JSON and the ledger as Zarr v3 over HTTP (read-only)",
    )
    .argument("<path>", "one task's tracking store, or a tracking directory (all its stores)")
    .option(
      "--listen <host:port>",
      `where to listen (default ${DEFAULT_VIEW_LISTEN}; port 0 picks a free one); any address but loopback, e.g. 0.0.0.0:8000, puts a secret token in the URL`,
    )
    .action(async (target: string, opts: ServeOptions) => {
      // Loaded when used: the page's script (ECharts) is most of a megabyte to parse.
      const { serveCommand } = await import("./serve.ts");
      setExitCode(await serveCommand(target, opts));
    });

  sub("report")
    .description(
      "write one self-contained HTML file picturing tracking stores: block map, runs, timeline, failures",
    )
    .argument("<path>", "one task's tracking store, or a tracking directory (all its stores)")
    .option("-o, --output <file>", `the HTML file to write (default: ${DEFAULT_REPORT_FILE})`)
    .action(async (target: string, opts: ReportOptions) => {
      const { reportCommand } = await import("./report.ts");
      setExitCode(reportCommand(target, opts));
    });

  sub("reset")
    .description("forget recorded blocks so the next run processes them again")
    .argument("<path>", "one task's tracking store, or a tracking directory (all its stores)")
    .option("--failed", "only failed blocks that are not done: clear their failure counts")
    .option(
      "--roi <offset:shape>",
      "only blocks whose write ROI intersects this box, e.g. 0,0:64,64",
    )
    .option(
      "--yes",
      "do not ask before clearing done marks (required when stdin is not a terminal)",
    )
    .action(async (target: string, opts: ResetOptions) => {
      setExitCode(await resetCommand(target, opts));
    });

  sub("accept")
    .description(
      "take done blocks as made by the current version/params without running them (a cosmetic bump)",
    )
    .argument("<pipeline>", "pipeline file whose current recipe the blocks are taken as made by")
    .option("--tracking-dir <dir>", "the stores at <dir>/<task id>, as for run")
    .option(
      "--task <id>",
      "only this task; repeatable (default: every task with provenance)",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--roi <offset:shape>", "only blocks whose write ROI intersects this box")
    .option("--json", "print machine-readable JSON (schema: docs/guide/json-outputs.md)")
    .action(async (pipeline: string, opts: AcceptOptions) => {
      setExitCode(await acceptCommand(pipeline, opts));
    });

  sub("verify")
    .description(
      "re-hash every committed output and compare with the manifest (read-only); --against: compare two stores block by block",
    )
    .argument("<path>", "one task's tracking store, or a tracking directory (all its stores)")
    .option("--against <other>", "compare with this store or tracking directory by content hash")
    .option("--json", "print machine-readable JSON (schema: docs/guide/json-outputs.md)")
    .action(async (target: string, opts: VerifyOptions) => {
      setExitCode(await verifyCommand(target, opts));
    });

  sub("demo")
    .description("run a built-in three-task pipeline on a generated 3-D volume")
    .option("--dir <dir>", "where to write the demo's data", "blockwise-demo")
    .option("--serial", "run the demo in the main thread")
    .option("--tracking-dir <dir>", "where the demo's ledger goes (default: <dir>/tracking)")
    .option(
      "--resource-tracking",
      "also record each block's wall and CPU time, peak memory, I/O and worker (for blockwise report)",
    )
    .action(async (opts: DemoOptions) => {
      setExitCode(await demoCommand(opts));
    });

  sub("init")
    .description(
      "write a starter pipeline (every field shown) and a .gitignore into DIR (an existing .gitignore gets the lines it lacks)",
    )
    .argument("[dir]", "where to write them (default: this folder; created if missing)")
    .option("--python", "a pipeline whose process function is Python (task.py)")
    .action((dir: string | undefined, opts: { python?: boolean }) => {
      setExitCode(initCommand(dir, opts));
    });

  sub("migrate")
    .description("migrate a task's tracking store in place to its grown totalRoi")
    .argument("<path>", "the task's tracking store")
    .requiredOption("--pipeline <file>", "pipeline file with the task's new layout")
    .requiredOption("--task <id>", "the task whose store PATH is")
    .option("--dry-run", "say what would change, change nothing")
    .option("--json", "print the report as JSON")
    .action(
      async (
        store: string,
        opts: { pipeline: string; task: string; dryRun?: boolean; json?: boolean },
      ) => {
        setExitCode(await migrateCommand(store, opts));
      },
    );

  addMaskImportCommand(
    sub("mask").description("skip masks: import a mask from elsewhere as a task's block grid"),
    version,
  );

  sub("types")
    .description("print TypeScript declarations for pipeline files (save as blockwise.d.ts)")
    .action(() => typesCommand());

  program.exitOverride();
  for (const c of program.commands) c.exitOverride();
  return program;
}

/** Parse the arguments, run the command and return the process exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let code = 0;
  // Which codecs run is found by loading libblosc (8-12 ms): only for --version.
  const wantsVersion = argv.some((a) => a === "--version" || a === "-V");
  const program = buildProgram((c) => (code = c), wantsVersion ? await codecsLine() : null);
  try {
    await program.parseAsync([...argv]);
    return code;
  } catch (error) {
    if (error instanceof OutputClosed) return code;
    if (error instanceof CommanderError) {
      // Help and version exit 0; commander already printed its message.
      return exitCodeForError(error) ?? EXIT_INVALID_INPUT;
    }
    const mapped = exitCodeForError(error);
    const fileSystem = mapped === null ? fileSystemFailure(error) : null;
    if (fileSystem !== null) {
      process.stderr.write(`error: ${fileSystem.message}\n`);
      return fileSystem.code;
    }
    if (mapped === null) {
      process.stderr.write(
        `blockwise: internal error (please report it): ${
          error instanceof Error ? error.stack ?? error.message : String(error)
        }\n`,
      );
      return EXIT_INTERNAL_ERROR;
    }
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    return mapped;
  }
}

/** A command's options with `--resources` as parsed (counts and GPUs). */
type WithResources<T> = Omit<T, "resources" | "gpu"> & { resources?: ResourcesOption };

function parseResourcesOption(value: string): ResourcesOption {
  try {
    return parseResourceList(value);
  } catch (error) {
    if (error instanceof InputError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}

function parsePositiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) {
    throw new InvalidArgumentError(`expected a positive number of seconds, got "${value}"`);
  }
  return n;
}
