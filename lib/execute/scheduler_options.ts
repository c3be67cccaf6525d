/** Scheduler options from a pipeline, shared by the serial and parallel runners. */

import type { PipelineConfig } from "../pipeline/spec.ts";
import type { SchedulerTaskOptions } from "../schedule/mod.ts";

export function schedulerOptions(
  pipeline: PipelineConfig,
  options: { readonly alreadyDone?: (task: number) => boolean },
): SchedulerTaskOptions[] {
  return pipeline.tasks.map((t, i) => ({
    maxRetries: t.maxRetries,
    ...(options.alreadyDone?.(i) === true ? { alreadyDone: true } : {}),
  }));
}
