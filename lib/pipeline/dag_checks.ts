/**
 * The task DAG's checks for validation: as PipelineErrors, and from the tasks as written, so
 * that DAG problems are reported in the same round as field problems.
 */

import {
  buildDag,
  DagError,
  type DagInput,
  dagProblems,
  type TaskDag,
} from "../graph/pipeline_dag.ts";
import { PipelineError } from "../errors.ts";
import { isObject } from "./task_fields.ts";
import type { TaskConfig } from "./spec.ts";

/** Every DAG problem of the tasks as written (a task without a string id is left out). */
export function rawDagProblems(tasks: readonly unknown[]): PipelineError[] {
  return dagProblems(rawDagInputs(tasks)).map(asProblem);
}

/** Each task's id and upstream ids as written (what is not a string is left out). */
function rawDagInputs(tasks: readonly unknown[]): DagInput[] {
  return tasks.flatMap((task) => {
    if (!isObject(task) || typeof task["id"] !== "string") return [];
    const upstream = Array.isArray(task["upstream"])
      ? task["upstream"].filter((u): u is string => typeof u === "string")
      : [];
    return [{ id: task["id"], upstream }];
  });
}

function asProblem(error: DagError): PipelineError {
  return new PipelineError(error.message, error.taskId ?? null, error.field);
}

/** The DAG of validated tasks (whose DAG problems were reported already). */
export function dagOf(configs: readonly TaskConfig[]): TaskDag {
  try {
    return buildDag(configs);
  } catch (error) {
    if (error instanceof DagError) {
      throw new PipelineError(error.message, error.taskId ?? null, error.field);
    }
    throw error;
  }
}
