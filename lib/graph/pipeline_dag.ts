/**
 * The task-level DAG of a pipeline, built from each task's `upstream` list: unique ids, known
 * upstream ids, no cycles, and daisy's display order (Kahn's algorithm taking the smallest task
 * id first, ties broken by declaration order).
 */

export interface DagInput {
  readonly id: string;
  readonly upstream: readonly string[];
}

export interface TaskDag {
  /** Task ids in declaration order; indices below refer to this order. */
  readonly ids: readonly string[];
  readonly upstream: readonly (readonly number[])[];
  readonly downstream: readonly (readonly number[])[];
  /** Task indices in display (topological) order. */
  readonly order: readonly number[];
}

export class DagError extends Error {
  constructor(message: string, readonly taskId: string | undefined, readonly field: string) {
    super(message);
    this.name = "DagError";
  }
}

export function buildDag(tasks: readonly DagInput[]): TaskDag {
  const checked = checkDag(tasks);
  if (checked.problems.length > 0) throw checked.problems[0]!;
  return checked.dag;
}

/**
 * Every problem of the DAG at once (duplicate ids, bad upstream links, a cycle among the links
 * that are good), so that a pipeline is fixed in one round; the DAG is meaningful only without.
 */
export function dagProblems(tasks: readonly DagInput[]): DagError[] {
  return checkDag(tasks).problems;
}

function checkDag(tasks: readonly DagInput[]): { dag: TaskDag; problems: DagError[] } {
  const problems: DagError[] = [];
  const indexOf = new Map<string, number>();
  tasks.forEach((t, i) => {
    if (indexOf.has(t.id)) {
      problems.push(
        new DagError(
          `Duplicate task id "${t.id}" (tasks ${
            indexOf.get(t.id)
          } and ${i}); give every task a unique id`,
          t.id,
          "id",
        ),
      );
    } else {
      indexOf.set(t.id, i);
    }
  });
  const known = () => [...indexOf.keys()].map((k) => `"${k}"`).join(", ");
  const upstream = tasks.map((t) => {
    const seen = new Set<number>();
    const links: number[] = [];
    for (const u of t.upstream) {
      const j = indexOf.get(u);
      const problem = j === undefined
        ? `upstream "${u}" is not a task of this pipeline (tasks: ${known()}); fix the id or add the task`
        : j === indexOf.get(t.id)
        ? `lists itself in upstream; remove "${u}" from its upstream list`
        : seen.has(j)
        ? `upstream "${u}" is listed twice; list each upstream task once`
        : null;
      if (problem !== null) {
        problems.push(new DagError(`Task "${t.id}": ${problem}`, t.id, "upstream"));
      } else {
        seen.add(j!);
        links.push(j!);
      }
    }
    return links;
  });
  const downstream: number[][] = tasks.map(() => []);
  upstream.forEach((ups, i) => ups.forEach((u) => downstream[u]!.push(i)));

  const order = displayOrder(tasks.map((t) => t.id), upstream, downstream);
  if (order.length < tasks.length) {
    const cycle = findCycle(upstream, new Set(order));
    const names = cycle.map((i) => `"${tasks[i]!.id}"`).join(" -> ");
    problems.push(
      new DagError(
        `Pipeline contains a cycle: ${names}; remove one of these upstream links`,
        tasks[cycle[0]!]?.id,
        "upstream",
      ),
    );
  }
  return { dag: { ids: tasks.map((t) => t.id), upstream, downstream, order }, problems };
}

function displayOrder(
  ids: readonly string[],
  upstream: readonly (readonly number[])[],
  downstream: readonly (readonly number[])[],
): number[] {
  const remaining = upstream.map((u) => u.length);
  const ready: number[] = [];
  remaining.forEach((r, i) => r === 0 && ready.push(i));
  const before = (a: number, b: number) => ids[a]! < ids[b]! ? -1 : ids[a]! > ids[b]! ? 1 : a - b;
  const order: number[] = [];
  while (ready.length > 0) {
    // Pipelines have few tasks: a sorted array is simpler than a heap and just as fast here.
    ready.sort(before);
    const next = ready.shift()!;
    order.push(next);
    for (const d of downstream[next]!) if (--remaining[d]! === 0) ready.push(d);
  }
  return order;
}

/** A cycle among the tasks that Kahn's algorithm could not order, as a closed path. */
function findCycle(upstream: readonly (readonly number[])[], ordered: Set<number>): number[] {
  const start = upstream.findIndex((_, i) => !ordered.has(i));
  const path: number[] = [];
  const onPath = new Map<number, number>();
  let node = start;
  while (!onPath.has(node)) {
    onPath.set(node, path.length);
    path.push(node);
    node = upstream[node]!.find((u) => !ordered.has(u))!;
  }
  const cycle = path.slice(onPath.get(node)!).reverse();
  cycle.push(cycle[0]!);
  return cycle;
}

/** For each task, whether one of its direct upstream tasks is marked (e.g. temporary). */
export function readsMarked(dag: TaskDag, isMarked: (task: number) => boolean): boolean[] {
  return dag.upstream.map((ups) => ups.some(isMarked));
}
