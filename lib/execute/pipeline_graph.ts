/** From a validated pipeline to its layouts and block dependency graph. */

import { TaskLayout } from "../blocks/mod.ts";
import { buildDag, DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";

export function buildPipelineGraph(pipeline: PipelineConfig): DependencyGraph {
  const dag = buildDag(pipeline.tasks.map((t) => ({ id: t.id, upstream: t.upstream })));
  const layouts = pipeline.tasks.map((t) => new TaskLayout(t.layout));
  return new DependencyGraph(dag, layouts);
}
