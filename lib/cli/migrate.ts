/**
 * `blockwise migrate PATH --pipeline P --task T [--dry-run]`: migrate a task's store to the
 * task's current (grown) layout explicitly, or say what a migration would do.
 */

import * as path from "node:path";
import process from "node:process";
import { buildPipelineGraph } from "../execute/mod.ts";
import { deleteToStartFresh, InputError, StoreError } from "../errors.ts";
import { loadPipeline } from "../pipeline/mod.ts";
import {
  acquireStoreLock,
  migrationRefusal,
  planMigration,
  readStoreMetadata,
  recoverInterruptedMigration,
  storedLayoutOf,
  TrackingStore,
} from "../tracking/mod.ts";

export interface MigrateOptions {
  readonly pipeline: string;
  readonly task: string;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

export async function migrateCommand(storePath: string, options: MigrateOptions): Promise<number> {
  const dir = path.resolve(storePath);
  const pipeline = await loadPipeline(options.pipeline);
  const t = pipeline.tasks.findIndex((task) => task.id === options.task);
  if (t < 0) {
    throw new InputError(
      `Task "${options.task}" is not in ${pipeline.path}; its tasks are ${
        pipeline.tasks.map((task) => `"${task.id}"`).join(", ")
      }`,
    );
  }
  const layout = buildPipelineGraph(pipeline).layouts[t]!;
  const recovered = recoverInterruptedMigration(dir);
  if (recovered !== null) process.stderr.write(recovered + "\n");
  // The validator every command uses: a damaged store is refused here as by run and status.
  const stored = readStoreMetadata(dir);
  const current = storedLayoutOf(layout);
  const out = (report: Record<string, unknown>, text: string) =>
    process.stdout.write(options.json === true ? JSON.stringify(report) + "\n" : text + "\n");
  if (JSON.stringify(stored.storedLayout) === JSON.stringify(current)) {
    out(
      { path: dir, action: "none", reason: "layout unchanged" },
      `${dir}: the layout is unchanged; nothing to migrate.`,
    );
    return 0;
  }
  const refusal = migrationRefusal(stored.storedLayout, current);
  if (refusal !== null) {
    throw new StoreError(
      `Tracking store at ${dir} cannot be migrated to the layout of task "${options.task}": ${refusal}. ${
        deleteToStartFresh(dir)
      }`,
      dir,
    );
  }
  const plan = planMigration(dir, stored.storedLayout, current);
  const report = {
    path: dir,
    action: options.dryRun === true ? "would-migrate" : "migrated",
    grew: plan.grew,
    from_grid_shape: plan.from.grid_shape,
    to_grid_shape: plan.to.grid_shape,
    arrays: plan.arrays,
    done_before: plan.doneBefore,
    done_kept: plan.doneKept,
    done_dropped: plan.doneDropped,
  };
  const summary = `${plan.grew}; ${plan.doneKept} of ${plan.doneBefore} done blocks kept` +
    (plan.doneDropped > 0 ? `, ${plan.doneDropped} clipped by the old extent will run again` : "") +
    `; arrays: ${plan.arrays.join(", ")}`;
  if (options.dryRun === true) {
    out(report, `${dir} would be migrated: ${summary}.\n(dry run: nothing was changed)`);
    return 0;
  }
  const lock = acquireStoreLock(dir, {
    command: process.argv.slice(1).join(" "),
    onNotice: (m) => process.stderr.write(m + "\n"),
  });
  try {
    const store = await TrackingStore.open(dir, {
      taskId: options.task,
      layout,
      resourceTracking: stored.attributes.resource_tracking,
      onNotice: () => {},
    });
    store.close();
  } finally {
    lock.release();
  }
  out(report, `${dir} migrated: ${summary}.`);
  return 0;
}
