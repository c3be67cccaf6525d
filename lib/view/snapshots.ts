/**
 * How often `blockwise serve` rebuilds its JSON documents while a run writes the stores.
 *
 * Each document (`/api/frame`, `/api/report`, `/api/status`) is cached as its JSON text and
 * rebuilt only when a request finds it stale: older (since its build ended) than
 * `max(minAge, factor × the time its last build took)`. Builds are synchronous (they read the
 * stores), so requests that arrive during one wait for it and then share its result; with no
 * request nothing is built at all. Failures are cached the same way.
 *
 * The rule for frames, `max(1 s, 20 × build time)`:
 * - cost: between the end of one build and the next at least 20 times the last build's time
 *   pass, so frames take at most 1/21 < 5 % of one core, however large the stores and however
 *   many pages poll (a build much slower than the one before overshoots once, then the wait
 *   grows with it);
 * - freshness: a frame that builds in at most 100 ms is rebuilt at least every 2 s (a synthetic
 *   store of 10^6 blocks with every resource array builds its frame in 60-110 ms under Bun);
 *   larger stores refresh less often, in proportion to their size, rather than eat the
 *   machine a run is using. Small stores refresh every second at most (the page polls at
 *   about that rate; more would only cost).
 * Full reports (every resource array, distributions, timeline: 0.5-0.8 s for those 10^6
 * blocks) use `max(10 s, 20 × build time)`: the page takes one at start and then lives on
 * frames. `status` JSON (`/api/status`) uses the frame rule.
 */

export interface RefreshRule {
  /** Seconds a document is used at least, however fast it builds. */
  readonly minAge: number;
  /** A document is used at least this many times as long as its last build took. */
  readonly factor: number;
}

export const FRAME_REFRESH: RefreshRule = { minAge: 1, factor: 20 };
export const REPORT_REFRESH: RefreshRule = { minAge: 10, factor: 20 };
export const STATUS_REFRESH: RefreshRule = { minAge: 1, factor: 20 };

/** A built document, or why its build failed. */
export type Built =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly message: string };

/** One cached document (see the module comment). `clock` is in milliseconds. */
export class Snapshot {
  readonly #build: () => string;
  readonly #rule: RefreshRule;
  readonly #clock: () => number;
  #built: Built | null = null;
  #readyAt = 0;
  #tookMs = 0;
  #builds = 0;

  constructor(
    build: () => string,
    rule: RefreshRule,
    clock: () => number = () => performance.now(),
  ) {
    this.#build = build;
    this.#rule = rule;
    this.#clock = clock;
  }

  /** Milliseconds the current document is used for after its build ended. */
  get maxAgeMs(): number {
    return Math.max(this.#rule.minAge * 1000, this.#rule.factor * this.#tookMs);
  }

  /** How many builds ran so far. */
  get builds(): number {
    return this.#builds;
  }

  /** The cached document, rebuilt first when it is stale. */
  get(): Built {
    if (this.#built !== null && this.#clock() - this.#readyAt <= this.maxAgeMs) return this.#built;
    const start = this.#clock();
    let built: Built;
    try {
      built = { ok: true, text: this.#build() };
    } catch (error) {
      built = { ok: false, message: error instanceof Error ? error.message : String(error) };
    }
    this.#readyAt = this.#clock();
    this.#tookMs = Math.max(0, this.#readyAt - start);
    this.#builds++;
    this.#built = built;
    return built;
  }
}
