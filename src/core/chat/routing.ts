/**
 * The models a chat request names, in order: its `model`, then its `models` fallbacks. How they become
 * endpoints (the model catalog, `provider` preferences, the account's routing settings) is in ./routing/
 * (route.ts, docs/routing.md).
 */
const strings = (v: unknown): string[] | undefined => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : undefined);

/** `model` then the `models` fallbacks, first occurrence kept (linear: a Set, not a scan per entry). */
export function modelsOf(body: Readonly<Record<string, unknown>>): string[] {
  const seen = new Set<string>();
  if (typeof body.model === "string" && body.model) seen.add(body.model);
  for (const m of strings(body.models) ?? []) if (m) seen.add(m);
  return [...seen];
}
