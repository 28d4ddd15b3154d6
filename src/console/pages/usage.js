// Usage: cost and tokens per UTC day for the last 30 days (today so far included), split by model, API key
// or provider (`#/usage?by=model|key|provider`), from GET /activity. Each chart is an SVG drawn here (stacked
// bars: one bar segment per day and series with activity; no library, no inline style) and carries the same
// numbers in a table beside it, so assistive technology and copy-paste read exactly what the API returned.
import { api } from "../lib/api.js";
import { dataTable, errorText, h, loading, replace } from "../lib/dom.js";
import { loadNames } from "../lib/names.js";

const DAYS = 30;
const DAY_MS = 86_400_000;
const SPLITS = [
  { by: "model", label: "By model", column: "Model", of: (r) => r.model ?? "?" },
  { by: "key", label: "By API key", column: "API key", of: (r) => r.api_key_hash ?? "?" },
  { by: "provider", label: "By provider", column: "Provider", of: (r) => r.provider_name ?? "?" },
];
// Eight colours told apart by most colour-blind readers (Okabe–Ito plus two); the legend names each series.
const COLOURS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];
const SVG = "http://www.w3.org/2000/svg";

/** An SVG element with attributes (presentation attributes only: the page's CSP allows no inline style). */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** A number as plain decimal text, never in exponent form: 1e-15 → "0.000000000000001". */
export function plain(n) {
  const text = String(n);
  const m = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (!m) return text;
  const [, sign, int, frac = "", exp] = m;
  const digits = int + frac;
  const point = int.length + Number(exp);
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`.replace(/\.?0+$/, "");
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** The 30 UTC days ending today, YYYY-MM-DD, oldest first. */
function windowDays() {
  const now = new Date();
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: DAYS }, (_, i) => new Date(today - (DAYS - 1 - i) * DAY_MS).toISOString().slice(0, 10));
}

/**
 * The chart and its table for one measure. `cells` maps "day\u0000series" to the API's value; `series` are
 * the series ids in legend order, `nameOf` their labels, `format` a value as the table shows it.
 */
function chart({ title, unit, days, series, nameOf, cells, format, tick = format }) {
  const W = 720;
  const H = 260;
  const left = 64;
  const right = 12;
  const top = 12;
  const bottom = 34;
  const band = (W - left - right) / days.length;
  const totals = days.map((d) => series.reduce((sum, id) => sum + (cells.get(`${d}\u0000${id}`) ?? 0), 0));
  const max = Math.max(...totals, 0);
  const y = (v) => top + (H - top - bottom) * (1 - (max > 0 ? v / max : 0));
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", "aria-hidden": "true", focusable: "false" });
  svg.append(s("line", { x1: left, y1: H - bottom, x2: W - right, y2: H - bottom, stroke: "#57606a" }));
  for (const v of max > 0 ? [0, max / 2, max] : [0]) {
    svg.append(
      s("line", { x1: left - 4, y1: y(v), x2: W - right, y2: y(v), stroke: "#d0d7de" }),
      s("text", { x: left - 8, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#1b1f24" }, tick(v)),
    );
  }
  const bars = s("g", { class: "bars" });
  let segments = 0;
  days.forEach((d, i) => {
    let base = 0;
    series.forEach((id, k) => {
      const v = cells.get(`${d}\u0000${id}`) ?? 0;
      if (!(v > 0)) return;
      const rect = s(
        "rect",
        {
          x: left + i * band + band * 0.15,
          width: band * 0.7,
          y: y(base + v),
          height: Math.max(y(base) - y(base + v), 0.5),
          fill: COLOURS[k % COLOURS.length],
          "data-day": d,
          "data-series": id,
          "data-value": format(v),
        },
        s("title", {}, `${d} · ${nameOf(id)}: ${format(v)}${unit ? ` ${unit}` : ""}`),
      );
      bars.append(rect);
      base += v;
      segments += 1;
    });
    if (i % 5 === 4 || i === days.length - 1) {
      svg.append(s("text", { x: left + i * band + band / 2, y: H - bottom + 16, "text-anchor": "middle", "font-size": 11, fill: "#1b1f24" }, d.slice(5)));
    }
  });
  svg.append(bars);
  const busiest = totals.indexOf(max);
  const summary =
    segments === 0
      ? `${title}: no activity in the last ${DAYS} days.`
      : `${title}, stacked bars for ${series.length} series over ${DAYS} days; the busiest day is ${days[busiest]} with ${format(max)}${unit ? ` ${unit}` : ""}. The table beside it has every value.`;
  const legend = h(
    "ul",
    { class: "legend" },
    series.map((id, k) => h("li", {}, s("svg", { viewBox: "0 0 10 10", class: "swatch", "aria-hidden": "true" }, s("rect", { width: 10, height: 10, fill: COLOURS[k % COLOURS.length] })), nameOf(id))),
  );
  const table = dataTable(
    `${title} table`,
    `${title} per UTC day`,
    ["Day (UTC)", ...series.map(nameOf)],
    days.map((d) => h("tr", {}, h("th", { scope: "row" }, d), series.map((id) => h("td", { class: "num" }, format(cells.get(`${d}\u0000${id}`) ?? 0))))),
  );
  return h(
    "section",
    { class: "usage-chart", "aria-label": title },
    h("h2", {}, title),
    h("div", { class: "chart-pair" }, h("figure", { class: "chart", role: "img", "aria-label": summary, "data-segments": String(segments) }, svg, legend), table),
  );
}

export async function render(main, _params, query) {
  const split = SPLITS.find((x) => x.by === query.get("by")) ?? SPLITS[0];
  main.append(
    h("h1", {}, "Usage"),
    h("p", {}, `Cost and tokens per UTC day for the last ${DAYS} days, today so far included. A generation counts on the day it was made; BYOK-served generations cost the account nothing (their provider bills your own key).`),
    h(
      "nav",
      { class: "buttons", "aria-label": "Split usage" },
      SPLITS.map((x) => h("a", { href: `#/usage?by=${x.by}`, "aria-current": x === split ? "page" : null }, x.label)),
    ),
  );
  const area = h("div", {}, loading("Loading usage…"));
  main.append(area);
  let rows;
  let names;
  try {
    [rows, names] = await Promise.all([
      api("GET", `/activity?include_today=true&group_by=${split.by}`).then((r) => r.data),
      split.by === "key" ? loadNames() : Promise.resolve(undefined),
    ]);
  } catch (e) {
    replace(area, errorText(e.message));
    return;
  }
  const days = windowDays();
  const cost = new Map();
  const tokens = new Map();
  const totals = new Map();
  for (const r of rows) {
    const id = split.of(r);
    cost.set(`${r.date}\u0000${id}`, r.usage);
    tokens.set(`${r.date}\u0000${id}`, r.prompt_tokens + r.completion_tokens);
    totals.set(id, (totals.get(id) ?? 0) + r.usage + (r.prompt_tokens + r.completion_tokens) * 1e-12);
  }
  // Busiest series first (by cost, then tokens), so the first colours go to what matters most.
  const series = [...totals.keys()].sort((a, b) => totals.get(b) - totals.get(a) || (a < b ? -1 : 1));
  const nameOf = split.by === "key" ? (hash) => names?.key(hash) ?? `key ${hash.slice(0, 12)}…` : (id) => id;
  if (rows.length === 0) {
    replace(area, h("p", {}, `No activity in the last ${DAYS} days.`));
    return;
  }
  replace(
    area,
    chart({ title: `Cost per day (USD), ${split.label.toLowerCase()}`, unit: "USD", days, series, nameOf, cells: cost, format: (v) => plain(v), tick: (v) => plain(Number(v.toPrecision(3))) }),
    chart({ title: `Tokens per day (prompt + completion), ${split.label.toLowerCase()}`, unit: "tokens", days, series, nameOf, cells: tokens, format: (v) => String(Math.round(v)) }),
  );
}
