/**
 * A faster `observe` for prom-client histograms and `inc` for counters, for label sets already recorded (issue 24:
 * a chat request makes about eight observations, 0.3–0.55 µs each in prom-client 15.1.3, which per call builds its
 * label hash string, validates every label name and makes a closure and an object).
 *
 * The entry a label set updates is found through Maps of the label values in the metric's label order, then updated
 * exactly as prom-client updates it (histogram: sum, count and the value's bucket; counter: value); the entry is
 * the one in the metric's own `hashMap`, so what the registry renders is unchanged. Anything else — a label set not
 * recorded yet, a label name the metric does not have, a value prom-client refuses, a metric reset since (its
 * `hashMap` replaced) — goes to prom-client's own method, which creates the entry (found through the Maps next
 * time) or throws as before. Depends on prom-client's internals: its version is pinned (package.json) and
 * test/unit/foundation/metric-fast-path.test.ts renders the same text both ways.
 */
import { createRequire } from "node:module";
import type { Counter, Histogram } from "prom-client";

const require = createRequire(import.meta.url);
const { hashObject } = require("prom-client/lib/util.js") as { hashObject(labels: object, sortedLabelNames: readonly string[]): string };

type Labels = Record<string, string | number | undefined>;

interface Internals<E> {
  labelNames: readonly string[];
  sortedLabelNames: readonly string[];
  hashMap: Record<string, E>;
}

interface HistogramEntry {
  sum: number;
  count: number;
  bucketValues: Record<number, number>;
}

interface CounterEntry {
  value: number;
}

/** The entry of a label set in `metric.hashMap`, found through nested Maps of the label values; undefined: not recorded (or an unknown name). */
function entryFinder<E>(metric: Internals<E>): (labels: Labels) => E | undefined {
  const names = metric.labelNames;
  const known = new Set(names);
  const root = new Map<unknown, unknown>();
  return (labels) => {
    for (const name in labels) if (!known.has(name)) return undefined;
    let node = root;
    for (let i = 0; i < names.length - 1; i++) {
      const v = labels[names[i]!];
      let next = node.get(v) as Map<unknown, unknown> | undefined;
      if (!next) node.set(v, (next = new Map()));
      node = next;
    }
    const last = names.length > 0 ? labels[names[names.length - 1]!] : undefined;
    const leaf = node.get(last) as { hash: string; entry: E } | undefined;
    const map = metric.hashMap;
    if (leaf && map[leaf.hash] === leaf.entry) return leaf.entry;
    const hash = hashObject(labels, metric.sortedLabelNames);
    const entry = map[hash];
    if (entry === undefined) return undefined;
    node.set(last, { hash, entry });
    return entry;
  };
}

/** Gives `histogram` the fast `observe(labels, value)` (not for histograms with exemplars: they are left as they are). */
export function fastObserve<T extends string>(histogram: Histogram<T>): Histogram<T> {
  const h = histogram as unknown as Internals<HistogramEntry> & { enableExemplars: boolean; upperBounds: readonly number[]; observe: (...a: unknown[]) => void };
  if (h.enableExemplars) return histogram;
  const slow = h.observe.bind(h);
  const find = entryFinder(h);
  const bounds = h.upperBounds;
  // The buckets' property keys as strings, made once: a number key is converted to its string on every access
  // (≈ 0.16 µs an observation, ≈ 0.8 % of serve's CPU at c=32; bench/README.md, "serve's CPU per non-streamed request").
  // ToPropertyKey of a number is its String(), the key prom-client's `bucketValues[bound]` made.
  const keys = bounds.map((b) => String(b));
  h.observe = (labels?: unknown, value?: unknown) => {
    if (typeof labels === "object" && labels !== null && typeof value === "number" && Number.isFinite(value)) {
      const entry = find(labels as Labels);
      if (entry) {
        entry.sum += value;
        entry.count += 1;
        // prom-client's findBound: the first upper bound at or above the value; above them all, no bucket (+Inf is the count).
        for (let i = 0; i < bounds.length; i++) {
          if (value <= bounds[i]!) {
            const key = keys[i]!;
            if (Object.prototype.hasOwnProperty.call(entry.bucketValues, key)) entry.bucketValues[key as unknown as number]! += 1;
            break;
          }
        }
        return;
      }
    }
    slow(labels, value);
  };
  return histogram;
}

/** Gives `counter` the fast `inc(labels[, value])` (not for counters with exemplars). */
export function fastInc<T extends string>(counter: Counter<T>): Counter<T> {
  const c = counter as unknown as Internals<CounterEntry> & { enableExemplars?: boolean; inc: (...a: unknown[]) => unknown };
  if (c.enableExemplars) return counter;
  const slow = c.inc.bind(c);
  const find = entryFinder(c);
  c.inc = (labels?: unknown, value?: unknown) => {
    if (typeof labels === "object" && labels !== null && (value === undefined || (typeof value === "number" && Number.isFinite(value) && value >= 0))) {
      const entry = find(labels as Labels);
      if (entry) {
        entry.value += value === undefined ? 1 : value;
        return;
      }
    }
    return slow(labels, value);
  };
  return counter;
}
