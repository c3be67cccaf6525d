/**
 * Building DOM nodes. Data only ever reaches the page as text nodes or attribute values, never
 * as markup, so a message holding `<script>` stays text.
 */

export type Child = Node | string | number | null | undefined | false;

export interface Props {
  readonly class?: string;
  readonly title?: string;
  /** `data-*` and other attributes, set with setAttribute. */
  readonly attrs?: Readonly<Record<string, string>>;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props | null = null,
  ...children: readonly Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props?.class) el.className = props.class;
  if (props?.title) el.title = props.title;
  if (props?.attrs) {
    for (const [k, v] of Object.entries(props.attrs)) el.setAttribute(k, v);
  }
  append(el, children);
  return el;
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/** Replace the children of `el`. */
export function fill(el: Element, ...children: readonly Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A table with a header row; `rows` are lists of cells (text or nodes). */
export function table(
  headers: readonly string[],
  rows: readonly (readonly Child[])[],
  rowAttrs?: (i: number) => Readonly<Record<string, string>> | null,
): HTMLTableElement {
  const head = h("thead", null, h("tr", null, ...headers.map((t) => h("th", null, t))));
  const body = h(
    "tbody",
    null,
    ...rows.map((cells, i) =>
      h(
        "tr",
        rowAttrs ? { attrs: rowAttrs(i) ?? {} } : null,
        ...cells.map((c) => h("td", null, c)),
      )
    ),
  );
  return h("table", { class: "data" }, head, body);
}

/** A message in a wrapping, preformatted box (as text). */
export function pre(text: string): HTMLElement {
  return h("pre", { class: "message" }, text);
}

/**
 * A `<dl>`-like grid of label/value pairs; a value may carry a `data-count` key and its exact
 * number as `data-value` (the text shows it formatted, with thousands separators).
 */
export function facts(
  items: readonly (readonly [string, Child, string?, number?])[],
): HTMLElement {
  return h(
    "dl",
    { class: "facts" },
    ...items.map(([label, value, key, exact]) =>
      h(
        "div",
        null,
        h("dt", null, label),
        h(
          "dd",
          key
            ? {
              attrs: {
                "data-count": key,
                ...(exact === undefined ? {} : { "data-value": String(exact) }),
              },
            }
            : null,
          value,
        ),
      )
    ),
  );
}
