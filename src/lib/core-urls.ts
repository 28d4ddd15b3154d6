/** A comma-separated list of core URLs (gateway PORTICO_CORE_URL, host --core), in failover order. */
export function parseCoreUrls(value: string, setting: string): string[] {
  const urls = value
    .split(",")
    .map((u) => u.trim())
    .filter((u) => u !== "");
  if (urls.length === 0) throw new Error(`${setting}: give at least one core URL`);
  for (const u of urls) {
    let ok = false;
    try {
      ok = /^https?:$/.test(new URL(u).protocol);
    } catch {
      ok = false;
    }
    if (!ok) throw new Error(`${setting}: ${u} is not an http:// or https:// URL`);
  }
  return urls;
}
