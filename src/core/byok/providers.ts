/**
 * The BYOK provider slugs a credential may name. The list itself is data (providers.json, the
 * 112-value `BYOKProviderSlug` set of the published SDK), so updating it never touches code.
 */
import providers from "./providers.json" with { type: "json" };

/** Every accepted provider slug, lowercase, exactly as listed (two contain a slash). */
export const BYOK_PROVIDER_SLUGS: readonly string[] = Object.freeze([...providers.slugs]);

const SLUGS: ReadonlySet<string> = new Set(BYOK_PROVIDER_SLUGS);

export function isByokProvider(slug: string): boolean {
  return SLUGS.has(slug);
}
