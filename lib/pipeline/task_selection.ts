/**
 * `run --tasks` and `plan --tasks`: a run of some tasks of a pipeline. The run takes the named
 * tasks and every task upstream of them (what they read must be built first, as `make` builds a
 * target's prerequisites), in the pipeline file's order; the other tasks are left out, as if the
 * file did not list them, except that what their blocks still have to read is kept on disk
 * (lib/outputs/outside_readers.ts).
 */

import { InputError } from "../errors.ts";
import type { PipelineConfig } from "./spec.ts";

export interface TaskSelection {
  /** What the run sees: the named tasks and everything upstream of them, in file order. */
  readonly pipeline: PipelineConfig;
  /** The whole pipeline, whose other readers keep the temporary blocks they still need. */
  readonly whole: PipelineConfig;
  /** Ids of the tasks left out, in file order (empty without `--tasks`). */
  readonly leftOut: readonly string[];
}

/** Every task of the pipeline: a run without `--tasks`. */
export function allTasks(pipeline: PipelineConfig): TaskSelection {
  return { pipeline, whole: pipeline, leftOut: [] };
}

/**
 * The values of `--tasks` (repeatable, each a comma-separated list of task ids) applied to the
 * pipeline; none given: every task. Refuses an unknown id or an empty list, naming the value.
 */
export function selectTasks(
  pipeline: PipelineConfig,
  values: readonly string[] | undefined,
): TaskSelection {
  if (values === undefined || values.length === 0) return allTasks(pipeline);
  const ids = pipeline.tasks.map((t) => t.id);
  const named = new Set<string>();
  for (const value of values) {
    const parts = value.split(",").map((s) => s.trim()).filter((s) => s !== "");
    if (parts.length === 0) {
      throw new InputError(
        `--tasks ${
          JSON.stringify(value)
        } names no task; give task ids separated by commas, e.g. --tasks ${
          ids.slice(0, 2).join(",")
        }.`,
      );
    }
    for (const id of parts) {
      if (!ids.includes(id)) {
        throw new InputError(
          `--tasks names "${id}", which is not a task of ${pipeline.path}; its tasks are ${
            ids.join(", ")
          }.`,
        );
      }
      named.add(id);
    }
  }
  const byId = new Map(pipeline.tasks.map((t) => [t.id, t]));
  const wanted = new Set<string>();
  const stack = [...named];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (wanted.has(id)) continue;
    wanted.add(id);
    stack.push(...byId.get(id)!.upstream);
  }
  return {
    pipeline: { ...pipeline, tasks: pipeline.tasks.filter((t) => wanted.has(t.id)) },
    whole: pipeline,
    leftOut: ids.filter((id) => !wanted.has(id)),
  };
}

/**
 * `--tasks` of a command, checked against its `--force` and `--skip-mask` values (a run's or a
 * plan's): the selection, or an InputError naming the value at fault.
 */
export function selectForCommand(
  pipeline: PipelineConfig,
  flags: {
    readonly tasks?: readonly string[];
    readonly force?: readonly string[];
    readonly skipMask?: readonly string[];
  },
): TaskSelection {
  const selection = selectTasks(pipeline, flags.tasks);
  refuseLeftOut(selection, "--force", flags.force ?? [], (v) => v.split(":")[0]!);
  refuseLeftOut(selection, "--skip-mask", flags.skipMask ?? [], (v) => v.split("=")[0]!);
  return selection;
}

/**
 * Refuse a flag value naming a task that `--tasks` left out (`--force`, `--skip-mask`): it would
 * otherwise read as an unknown task.
 */
export function refuseLeftOut(
  selection: TaskSelection,
  flag: string,
  values: readonly string[],
  taskOf: (value: string) => string,
): void {
  for (const value of values) {
    const id = taskOf(value);
    if (selection.leftOut.includes(id)) {
      throw new InputError(
        `${flag} ${
          JSON.stringify(value)
        } names task "${id}", which --tasks leaves out of this run (it runs ${
          selection.pipeline.tasks.map((t) => t.id).join(", ")
        }); add "${id}" to --tasks or drop the flag.`,
      );
    }
  }
}

/** The notice a run ("Running") or a plan ("Planning") of some tasks prints first. */
export function describeSelection(selection: TaskSelection, verb: string): string | null {
  if (selection.leftOut.length === 0) return null;
  return `${verb} only tasks ${
    selection.pipeline.tasks.map((t) => t.id).join(", ")
  } (--tasks and the tasks they read); left out: ${selection.leftOut.join(", ")}.`;
}
