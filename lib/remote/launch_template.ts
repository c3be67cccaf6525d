/** The generic launcher's argv template: where the worker command goes, and a few names. */

import { InputError, shellQuote } from "../errors.ts";
import { COMMAND_LAUNCH_PLACEHOLDERS } from "../pipeline/launch_fields.ts";

/** What a launch template needs of the worker it launches. */
export interface LaunchTemplateWorker {
  readonly taskId: string;
  readonly workerId: number;
  readonly argv: readonly string[];
}

export { COMMAND_LAUNCH_PLACEHOLDERS };

/** Expand the launch template for one worker. */
export function expandLaunchTemplate(
  template: readonly string[],
  spec: LaunchTemplateWorker,
  logPath: string,
): string[] {
  const out: string[] = [];
  for (const arg of template) {
    if (arg === "{worker}") {
      out.push(...spec.argv);
      continue;
    }
    out.push(arg.replace(/\{\{|\}\}|\{([a-z_]+)\}/g, (match, name: string | undefined) => {
      if (match === "{{") return "{";
      if (match === "}}") return "}";
      switch (name) {
        case "worker_shell":
          return spec.argv.map(shellQuote).join(" ");
        case "task_id":
          return spec.taskId;
        case "worker_id":
          return String(spec.workerId);
        case "log":
          return logPath;
        case "worker":
          throw new InputError(
            `The launch command's "{worker}" must be an element of its own (it becomes several arguments); got ${
              JSON.stringify(arg)
            }. Use "{worker_shell}" inside a longer argument`,
          );
        default:
          throw new InputError(
            `The launch command has an unknown placeholder ${match} in ${
              JSON.stringify(arg)
            }; known: ${COMMAND_LAUNCH_PLACEHOLDERS.map((p) => `{${p}}`).join(" ")}`,
          );
      }
    }));
  }
  return out;
}
