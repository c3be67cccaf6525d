export {
  type AbandonReason,
  type CounterSnapshot,
  describeAbandonReason,
  type StartStage,
  type TaskPhase,
} from "./counters.ts";
export * from "./ready_queue.ts";
export * from "./scheduler.ts";
export * from "./resource_budget.ts";
export * from "./position_set.ts";
export * from "./device_pool.ts";
