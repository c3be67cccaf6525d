/**
 * SIGINT/SIGTERM handling for runs: the first signal asks the run to stop gracefully; a second
 * one exits at once with the signal's exit code.
 */

import process from "node:process";
import type { StopReason } from "../execute/mod.ts";
import { EXIT_SIGINT, EXIT_SIGTERM } from "./exit_codes.ts";

export interface StopSwitch {
  readonly reason: () => StopReason | null;
  readonly onStop: (listener: (reason: StopReason) => void) => void;
  readonly dispose: () => void;
}

export function installStopSwitch(beforeHardExit: () => void = () => {}): StopSwitch {
  let reason: StopReason | null = null;
  const listeners: ((reason: StopReason) => void)[] = [];
  const handler = (signal: StopReason) => () => {
    if (reason !== null) {
      process.stderr.write(`\nReceived ${signal} again: stopping now.\n`);
      beforeHardExit();
      process.exit(signal === "SIGINT" ? EXIT_SIGINT : EXIT_SIGTERM);
    }
    reason = signal;
    process.stderr.write(
      `\nReceived ${signal}: finishing blocks in flight, then stopping (send it again to stop now).\n`,
    );
    for (const l of listeners) l(signal);
  };
  const onInt = handler("SIGINT");
  const onTerm = handler("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  return {
    reason: () => reason,
    onStop: (listener) => listeners.push(listener),
    dispose: () => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
    },
  };
}
