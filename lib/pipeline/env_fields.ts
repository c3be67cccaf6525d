/**
 * The task fields that shape its worker processes' environment: `env` (variables for every
 * worker process of the task) and `workerProfile` (false turns the block-work profile of
 * lib/execute/worker_profile.ts off).
 */

import { describeValue } from "./describe_value.ts";
import { isObject, type TaskFields } from "./task_fields.ts";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const EXAMPLE = 'env: { OMP_NUM_THREADS: "4", MY_SETTING: "on" }';

/** `env`: names to strings, or null when absent. */
export function readEnv(t: TaskFields): Readonly<Record<string, string>> | null {
  const value = t.value("env");
  if (value === undefined) return null;
  if (!isObject(value) || Array.isArray(value)) {
    t.fail(
      "env",
      `must be an object of variable names to strings; got ${
        describeValue(value)
      }. Write ${EXAMPLE}.`,
    );
  }
  const env: Record<string, string> = {};
  for (const [name, setting] of Object.entries(value)) {
    if (!NAME.test(name)) {
      t.fail(
        "env",
        `has the variable name ${
          JSON.stringify(name)
        }, which is not a valid environment variable name; use letters, digits and "_", not starting with a digit.`,
      );
    }
    if (typeof setting === "number" && Number.isFinite(setting)) {
      env[name] = String(setting);
    } else if (typeof setting === "string") {
      if (setting.includes("\0")) {
        t.fail("env", `variable "${name}" contains a NUL character; remove it.`);
      }
      env[name] = setting;
    } else {
      t.fail(
        "env",
        `variable "${name}" must be a string; got ${describeValue(setting)}. Write ${EXAMPLE}.`,
      );
    }
  }
  return env;
}

/** `workerProfile`: default true. */
export function readWorkerProfile(t: TaskFields): boolean {
  return t.boolean(
    "workerProfile",
    "Omit it to give the task's worker processes the block-work profile, or write workerProfile: false to turn it off.",
  ) ?? true;
}
