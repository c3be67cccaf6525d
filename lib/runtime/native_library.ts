/**
 * What the system libraries blockwise may use through FFI (libblosc, libzstd) have in common:
 * an environment variable that says `off`, names a library, or is unset (the usual soname);
 * a library the variable names that cannot be used is an error, the usual one quietly falls
 * back; and loading happens once per thread, again after a failure.
 */

import process from "node:process";
import { InputError } from "../errors.ts";

/** What a library setting asks for. */
export interface LibraryChoice {
  /** The variable's value, trimmed ("" when unset or unreadable). */
  readonly setting: string;
  /** The library to open, or null: the setting is `off`, or no name is known here. */
  readonly library: string | null;
  /** Why there is no library to open (null when there is one). */
  readonly skipped: string | null;
  /**
   * Turns why `library` cannot be used into the fallback's reason, or, when the variable
   * named it, throws an InputError saying so and `fix`.
   */
  unusable(why: string): string;
}

/** `variable` of `env`, trimmed; "" when unset or unreadable (Deno without --allow-env). */
export function readSetting(
  env: Readonly<Record<string, string | undefined>>,
  variable: string,
): string {
  try {
    return env[variable]?.trim() ?? "";
  } catch {
    return "";
  }
}

/**
 * Reads `variable` from `env`: `off`, a path or soname, or unset (`usual`, the loader's name).
 * `what` names the library in messages ("libzstd"), `prefix` the codec ("zstd").
 */
export function chooseLibrary(
  env: Readonly<Record<string, string | undefined>>,
  variable: string,
  usual: string | null,
  names: {
    readonly what: string;
    readonly prefix: string;
    readonly fix: (setting: string) => string;
  },
): LibraryChoice {
  const setting = readSetting(env, variable);
  const explicit = setting !== "";
  const off = setting.toLowerCase() === "off";
  const library = off ? null : explicit ? setting : usual;
  const skipped = off
    ? `${variable}=off`
    : library === null
    ? `no ${names.what} name known on ${process.platform}`
    : null;
  return {
    setting,
    library,
    skipped,
    unusable(why) {
      if (!explicit) return `${library}: ${why}`;
      throw new InputError(
        `${names.prefix}: cannot use the ${names.what} "${library}": ${why}. Fix: ${
          names.fix(setting)
        }`,
      );
    },
  };
}

/**
 * `load` run once per thread: every call gets the same promise, except after it rejected,
 * when the next call tries again (a setting fixed in a long-lived process takes effect).
 */
export function oncePerThread<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    if (pending === undefined) {
      const loading = load();
      pending = loading;
      loading.catch(() => {
        if (pending === loading) pending = undefined;
      });
    }
    return pending;
  };
}
