/**
 * Making modules blockwise carries importable by their bare specifiers ("zarrita", "blockwise")
 * from a pipeline file that has no node_modules providing them.
 *
 * - Bun (the compiled binary and `bun main.ts`): a runtime plugin registers each one as a
 *   virtual module built from the namespace object blockwise already imported. Bun resolves a
 *   specifier that has no virtual module the usual way, from node_modules, so a local install
 *   wins simply by not being registered here.
 * - Deno (`deno run -A main.ts`): Deno has no resolve hook at run time; deno.json's import map
 *   sends these specifiers, from files outside blockwise's own tree, to the shims in
 *   `deno_modules/`, which ask `chosenNamespace` for the namespace published here: the local
 *   install's entry file when the pipeline has one, else blockwise's copy.
 *
 * A process imports one pipeline, so the choice is made once per process (and once per Web
 * Worker, which has its own module registry).
 */

import { pathToFileURL } from "node:url";

/** One module a pipeline may import by bare specifier. */
export interface VirtualModule {
  /** The bare specifier, e.g. "zarrita" or "@zarrita/storage/fs". */
  readonly specifier: string;
  /** blockwise's own copy, as imported by blockwise. */
  readonly bundled: Readonly<Record<string, unknown>>;
  /** The entry file of the pipeline's local install, which wins, or null. */
  readonly localEntry: string | null;
}

interface BunPluginBuilder {
  module(
    specifier: string,
    callback: () => { exports: Record<string, unknown>; loader: "object" },
  ): void;
}

interface BunGlobal {
  plugin(plugin: { name: string; setup(build: BunPluginBuilder): void }): void;
}

const CHOICES = Symbol.for("blockwise.virtualModules");
const registeredWithBun = new Set<string>();

type Published = Map<string, VirtualModule>;

function published(): Published {
  const store = globalThis as unknown as Record<symbol, Published | undefined>;
  let map = store[CHOICES];
  if (map === undefined) {
    map = new Map();
    store[CHOICES] = map;
  }
  return map;
}

/** Publishes the modules for the pipeline this process (or Web Worker) is about to import. */
export function provideVirtualModules(modules: readonly VirtualModule[]): void {
  const choices = published();
  for (const module of modules) choices.set(module.specifier, module);
  const bun = (globalThis as { Bun?: BunGlobal }).Bun;
  if (bun === undefined) return; // Deno: the import map's shims read `choices`.
  const missing = modules.filter((m) =>
    m.localEntry === null && !registeredWithBun.has(m.specifier)
  );
  if (missing.length === 0) return;
  for (const module of missing) registeredWithBun.add(module.specifier);
  bun.plugin({
    name: "blockwise bundled modules",
    setup(build) {
      for (const module of missing) {
        build.module(
          module.specifier,
          () => ({ exports: { ...module.bundled }, loader: "object" }),
        );
      }
    },
  });
}

/**
 * For a Deno shim: the namespace a pipeline importing `specifier` gets: the local install's
 * when one was published for it, else `bundled` (also when no pipeline was announced, e.g. a
 * module imported outside a run).
 */
export async function chosenNamespace<T extends object>(specifier: string, bundled: T): Promise<T> {
  const choice = published().get(specifier);
  if (choice === undefined || choice.localEntry === null) return bundled;
  return await import(pathToFileURL(choice.localEntry).href) as T;
}
