/**
 * `{ ...source }` for a copy that properties are then added to.
 *
 * On Node 20's V8 (11.3) an object literal that starts with a spread and then adds a key the source lacks
 * (`{ ...call, firstByteTimeoutMs }`, `{ ...usage, cost }`) gets a hidden class of its own every time: ≈ 2 µs to make
 * (against ≈ 0.05 µs when every later key is one the source has), a map left for the GC, and every later reader of the
 * copy (property loads, `JSON.stringify`) on its slow paths (bench/README.md, "Spreads that add a key"). A copy made by
 * `Object.assign` onto `{}` follows V8's ordinary transitions: the same own enumerable properties (string and
 * symbol keys, read through their getters) in the same order, and one shared map for copies of one shape.
 *
 * The two differ only for an own `__proto__` key (a `JSON.parse` result may have one): `Object.assign` would set the
 * copy's prototype where the spread defines the key; such a source is spread as before.
 */
export function copyOf<T extends object>(source: T): T {
  return Object.hasOwn(source, "__proto__") ? { ...source } : Object.assign({}, source);
}
