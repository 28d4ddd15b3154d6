import type { Config } from "../config.js";
import type { BootstrapExtension } from "../core/identity/bootstrap.js";
import { builtinInternExtension } from "../core/interns/builtin-intern.js";

/** Extra first-run steps from other domains (the built-in intern registers here). */
export function bootstrapExtensions(_cfg: Config): BootstrapExtension[] {
  return [builtinInternExtension()];
}
