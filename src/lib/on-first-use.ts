/**
 * A module imported on first use instead of at start-up (the web_fetch tool's HTML parsers, the tokenizer's
 * tables, undici): a serving process that never needs it does not hold its code and data (issue 24's memory goal).
 *
 * `resolved` is the modules' `import.meta.resolve(…)`, evaluated where the loader is declared, at start-up: a
 * package missing from the install still stops the process when it starts, as a static import would. Only the
 * module's evaluation waits for the first call; its promise is kept, so a module that fails to evaluate fails
 * every use the same way, with the import's own error.
 */
export function onFirstUse<T>(resolved: readonly string[], load: () => Promise<T>): () => Promise<T> {
  void resolved;
  let loading: Promise<T> | undefined;
  return () => (loading ??= load());
}
