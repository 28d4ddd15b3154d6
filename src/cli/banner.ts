/** What `portico serve` prints for people (stderr, never through the logger). No imports: the serve primary loads it. */

/**
 * Printed on stderr at every start of `portico serve` once it serves (by the primary when there are
 * workers): where the console, the API and the core answer. Keys are printed only by the first run.
 */
export function printServingBanner(urls: { gateway: string; core: string } | undefined): void {
  if (!urls) return;
  process.stderr.write(
    [
      "",
      "Portico is serving.",
      `  web console:     ${urls.gateway}/console/   (sign in with a management key)`,
      `  API base URL:    ${urls.gateway}/api/v1`,
      `  gRPC core:       ${urls.core}`,
      "",
    ].join("\n") + "\n",
  );
}
