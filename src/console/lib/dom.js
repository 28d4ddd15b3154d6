// DOM helpers. Every text reaches the page through text nodes (never parsed as HTML), so nothing the API
// returns can become markup; no inline style is ever set (the Content-Security-Policy forbids it).

/**
 * h("p", {class: "x", onclick: fn, "aria-live": "polite"}, "text", child, …)
 * Props starting with "on" add listeners; `hidden`, `disabled`, `checked`, `selected`, `required`,
 * `value` set properties; everything else is an attribute (false/null/undefined omit it).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (["hidden", "disabled", "checked", "selected", "required", "value", "readOnly"].includes(name)) el[name] = value;
    else if (name === "style") throw new Error("inline styles are not allowed");
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let ids = 0;
/** A unique id for label/aria wiring. */
export function uid(prefix = "f") {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** A labelled form field: {label, input, hint?} → <div class="field"><label/>input<p hint/></div>. */
export function field(label, input, hint) {
  const id = input.id || uid("field");
  input.id = id;
  const parts = [h("label", { for: id }, label), input];
  if (hint) {
    const hintId = `${id}-hint`;
    input.setAttribute("aria-describedby", hintId);
    parts.push(h("p", { class: "hint", id: hintId }, hint));
  }
  return h("div", { class: "field" }, parts);
}

/** An error line for a form; `show(message)` fills it, `show()` clears it. */
export function errorLine() {
  const el = h("p", { class: "error", role: "alert", hidden: true });
  return {
    el,
    show(message) {
      el.textContent = message ?? "";
      el.hidden = !message;
    },
  };
}

/** Announces a short status to screen readers (the page's polite live region). */
export function announce(text) {
  const region = document.getElementById("announce");
  if (!region) return;
  region.textContent = "";
  // A fresh text node in a later task so the same message twice is still read.
  setTimeout(() => {
    region.textContent = text;
  }, 30);
}

/** Dates as the reader's locale shows them, with the ISO form in a <time> element. */
export function time(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return h("time", { datetime: iso }, Number.isNaN(d.getTime()) ? iso : d.toLocaleString());
}


/**
 * What stands in for a list or a page part while it loads, so a list being read never looks empty:
 * a polite status ("Loading keys…") marked busy, replaced by the content or by the error.
 */
export function loading(text = "Loading…") {
  return h("p", { class: "loading", role: "status", "aria-busy": "true" }, text);
}

/** A failed load, said as an alert in place of what could not be shown. */
export function errorText(message) {
  return h("p", { class: "error", role: "alert" }, message);
}

/** A horizontally scrollable table wrapper, focusable so keyboard users can scroll it. */
export function tableWrap(label, table) {
  return h("div", { class: "table-wrap", role: "region", "aria-label": label, tabindex: "0" }, table);
}

/**
 * A data table in its scrollable wrapper: `label` names the region, `caption` (read by screen readers
 * only) says what the rows are, `columns` are the headings and `rows` the `tr` elements.
 */
export function dataTable(label, caption, columns, rows) {
  return tableWrap(
    label,
    h(
      "table",
      {},
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows),
    ),
  );
}

/**
 * Shows a secret the API returns once (a new API key, a host token) in `area`: a read-only field with
 * Copy, and "I have stored it", which clears the field and removes the box. Nothing keeps a copy.
 */
export function showSecretOnce(area, title, label, secret) {
  const noteId = uid("once-note");
  const value = h("input", { type: "text", readOnly: true, value: secret, class: "mono", "aria-describedby": noteId, spellcheck: "false" });
  const copy = h(
    "button",
    {
      type: "button",
      class: "secondary",
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(value.value);
          copy.textContent = "Copied";
        } catch {
          value.select();
          copy.textContent = "Press Ctrl+C to copy";
        }
      },
    },
    "Copy",
  );
  const dismiss = h(
    "button",
    {
      type: "button",
      onclick: () => {
        value.value = "";
        replace(area);
      },
    },
    "I have stored it",
  );
  replace(
    area,
    h(
      "div",
      { class: "card once", role: "region", "aria-label": title },
      h("h2", {}, title),
      h("p", { id: noteId }, "Store it now: it is shown only this once and cannot be recovered."),
      field(label, value),
      h("div", { class: "buttons" }, copy, dismiss),
    ),
  );
  value.focus();
  value.select();
}

/**
 * A button of a table row that changes something: asks `confirm` first when given, runs `run`, then
 * writes `done` to the page's status line and calls `after` (a refresh); a failure goes to `err`.
 */
export function actionButton({ label, ariaLabel, className = "secondary", confirm, run, done, status, after, err }) {
  return h(
    "button",
    {
      type: "button",
      class: className,
      "aria-label": ariaLabel,
      onclick: async () => {
        if (confirm && !window.confirm(confirm)) return;
        err.show();
        try {
          const result = await run();
          status.textContent = typeof done === "function" ? done(result) : done;
          await after?.();
        } catch (e) {
          err.show(e.message);
        }
      },
    },
    label,
  );
}
