/** Scheduler options from a pipeline, shared by the serial and parallel runners. */

import type { PipelineConfig } from "../pipeline/spec.ts";
import type { SchedulerTaskOptions } from "../schedule/mod.ts";
import type { ResumePlan } from "./resume_plan.ts";

export function schedulerOptions(
  pipeline: PipelineConfig,
  options: {
    readonly alreadyDone?: (task: number) => boolean;
    readonly resume?: ResumePlan;
    /** Pipelines with temporaries: ready blocks in position order (see `ReadyQueue`). */
    readonly preferDownstream?: boolean;
  },
): SchedulerTaskOptions[] {
  return pipeline.tasks.map((t, i) => {
    const except = options.resume?.except(i) ?? null;
    return {
      maxRetries: t.maxRetries,
      ...(options.preferDownstream === true ? { byPosition: true } : {}),
      ...(options.alreadyDone?.(i) === true
        ? { alreadyDone: true }
        : except === null
        ? {}
        : { satisfiedExcept: except }),
    };
  });
}
