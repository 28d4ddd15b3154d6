/**
 * Server tool kinds (docs/plugins.md, "Server tools"): which `tools[]` types of a chat request name a server
 * tool (`<brand>:<kind>` and the web-search shorthands), which kinds Portico runs, and the refusal of the
 * others. A request naming a kind Portico does not run is refused with a 400 naming the entry and listing
 * what is supported, never relayed without it.
 */
import { SERVER_TOOL_KINDS, WEB_SEARCH_SHORTHANDS } from "../../../contract/requests/chat-request.js";
import { invalidArgument } from "../../errors.js";

export type ServerToolKind = (typeof SERVER_TOOL_KINDS)[number];

/** The kinds Portico runs, in the order the refusal lists them. */
export const SUPPORTED_SERVER_TOOL_KINDS: readonly ServerToolKind[] = ["datetime", "experimental__search_models", "fusion", "web_fetch", "web_search"];

/**
 * Kinds refused by decision (docs/plugins.md): `bash` and `files` need a sandboxed place to run, which is the
 * intern plane's job (an intern host); `subagent` and `advisor` are nested agent runs; image generation needs
 * an image-output pipeline Portico does not have.
 */
const REFUSED_BY_DECISION: Readonly<Partial<Record<ServerToolKind, string>>> = {
  bash: "needs a sandbox to run commands in; Portico's sandboxed hosts are interns (POST /api/v1/interns/{internId}/chat/completions), where bash and files may come later",
  files: "needs a sandbox to keep files in; Portico's sandboxed hosts are interns (POST /api/v1/interns/{internId}/chat/completions), where bash and files may come later",
  subagent: "nested agent runs are not offered",
  advisor: "nested model consultations are not offered",
  image_generation: "image output is not offered",
};

/** The server tool kind of a `tools[]` type, or null when it is not a server tool (a function tool). */
export function serverToolKindOf(type: unknown, brand: string): ServerToolKind | null {
  if (typeof type !== "string") return null;
  if ((WEB_SEARCH_SHORTHANDS as readonly string[]).includes(type)) return "web_search";
  const prefix = `${brand}:`;
  if (!type.startsWith(prefix)) return null;
  const kind = type.slice(prefix.length);
  return (SERVER_TOOL_KINDS as readonly string[]).includes(kind) ? (kind as ServerToolKind) : null;
}

/** The supported types as a caller writes them, for messages. */
export function supportedTypesText(brand: string): string {
  if (SUPPORTED_SERVER_TOOL_KINDS.length === 0) return "none";
  const types = SUPPORTED_SERVER_TOOL_KINDS.map((k) => `${brand}:${k}`);
  if (SUPPORTED_SERVER_TOOL_KINDS.includes("web_search")) types.push(...WEB_SEARCH_SHORTHANDS.map((s) => `${s} (shorthand of ${brand}:web_search)`));
  return types.join(", ");
}

/** Throws a 400 naming `field` when `kind` is not run by Portico. */
export function assertSupported(kind: ServerToolKind, type: string, field: string, brand: string): void {
  if (SUPPORTED_SERVER_TOOL_KINDS.includes(kind)) return;
  const why = REFUSED_BY_DECISION[kind];
  const head = why ? `The server tool "${type}" is not supported (${why})` : `The server tool "${type}" is not implemented`;
  throw invalidArgument(field, `${head}; supported server tools: ${supportedTypesText(brand)}`);
}
