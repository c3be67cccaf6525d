/**
 * Value rendering and typo suggestions for pipeline validation messages: `describeValue` quotes
 * the value at fault in a short, runtime-independent form and `closest` proposes the known name
 * a misspelt one was probably meant to be.
 */

/** The candidate closest to `name` (case-insensitive edit distance), if close enough. */
export function closest(name: string, candidates: readonly string[]): string | null {
  const lower = name.toLowerCase();
  let best: string | null = null;
  let bestDistance = Math.max(1, Math.floor(name.length / 3));
  for (const candidate of candidates) {
    const d = editDistance(lower, candidate.toLowerCase());
    if (d <= bestDistance && (best === null || d < bestDistance)) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** A short, runtime-independent rendering of a value for error messages. */
export function describeValue(value: unknown, depth = 0): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
    case "number":
      return Object.is(value, -0) ? "-0" : String(value);
    case "bigint":
      return `${value}n`;
    case "function":
      return value.name === "" ? "a function" : `function ${value.name}`;
    case "object":
      break;
    default:
      return String(value);
  }
  if (value === null) return "null";
  if (ArrayBuffer.isView(value)) return `${value.constructor.name} of ${value.byteLength} bytes`;
  const nested = depth >= 2;
  if (Array.isArray(value)) {
    if (nested) return "[...]";
    const items = value.slice(0, 8).map((v: unknown) => describeValue(v, depth + 1));
    if (value.length > 8) items.push(`... ${value.length - 8} more`);
    return `[${items.join(", ")}]`;
  }
  if (nested) return "{...}";
  const entries = Object.entries(value);
  const items = entries.slice(0, 6).map(([k, v]) =>
    `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}: ${describeValue(v, depth + 1)}`
  );
  if (entries.length > 6) items.push("...");
  return items.length === 0 ? "{}" : `{ ${items.join(", ")} }`;
}
