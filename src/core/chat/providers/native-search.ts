/**
 * A provider's own web search (docs/plugins.md, "web", native search), as the `web` plugin asks for it on an
 * attempt (`UpstreamCall.webSearch`), and the provider's citations turned into the `url_citation` annotations
 * Portico returns on the message (the shape of the web plugin's own citations):
 *
 * - Anthropic Messages: the `web_search_20250305` server tool (`max_uses`, `allowed_domains` / `blocked_domains`,
 *   `user_location`); citations are `web_search_result_location` entries on the text blocks they support.
 * - Gemini: the `google_search` tool (no options); citations are the candidate's `groundingMetadata`
 *   (`groundingChunks` and `groundingSupports`, whose segment offsets count UTF-8 bytes).
 * - OpenAI chat completions: `web_search_options` (`user_location`) for the models the catalog marks as
 *   search-capable (`web_search_options` in their supported parameters); the provider's `annotations` are already
 *   `url_citation`s and pass through.
 */

/** The native search asked for on one attempt (only what the provider's tool honours; the web plugin checks). */
export interface NativeWebSearch {
  /** The request field that asked for it (`plugins[0]`), for errors; never sent. */
  askedBy?: string;
  maxUses?: number;
  allowedDomains?: string[];
  blockedDomains?: string[];
  userLocation?: { city?: string; country?: string; region?: string; timezone?: string };
}

export interface UrlAnnotation {
  type: "url_citation";
  url_citation: { url: string; title: string; content?: string; start_index: number; end_index: number };
}

export function urlAnnotation(url: string, title: string, content: string | undefined, start: number, end: number): UrlAnnotation {
  return { type: "url_citation", url_citation: { url, title, ...(content ? { content } : {}), start_index: start, end_index: end } };
}

/** Anthropic's server tool for `search` (docs.anthropic.com, "Web search tool"). */
export function anthropicWebSearchTool(search: NativeWebSearch): Record<string, unknown> {
  return {
    type: "web_search_20250305",
    name: "web_search",
    ...(search.maxUses !== undefined ? { max_uses: search.maxUses } : {}),
    ...(search.allowedDomains?.length ? { allowed_domains: search.allowedDomains } : {}),
    ...(search.blockedDomains?.length ? { blocked_domains: search.blockedDomains } : {}),
    ...(search.userLocation ? { user_location: { type: "approximate", ...search.userLocation } } : {}),
  };
}

/** One Anthropic `web_search_result_location` citation as an annotation spanning [start, end) of the content. */
export function anthropicCitation(citation: unknown, start: number, end: number): UrlAnnotation | undefined {
  const c = citation as { type?: unknown; url?: unknown; title?: unknown; cited_text?: unknown } | undefined;
  if (c?.type !== "web_search_result_location" || typeof c.url !== "string") return undefined;
  return urlAnnotation(c.url, typeof c.title === "string" ? c.title : "", typeof c.cited_text === "string" ? c.cited_text : undefined, start, end);
}

/** The UTF-16 offset (JavaScript's) of the UTF-8 byte offset `bytes` in `text` (clamped to the text). */
export function utf16Offset(text: string, bytes: number): number {
  let b = 0;
  let i = 0;
  while (i < text.length && b < bytes) {
    const cp = text.codePointAt(i)!;
    b += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    i += cp >= 0x10000 ? 2 : 1;
  }
  return i;
}

/**
 * Gemini's grounding (`groundingMetadata`) as annotations: one per (support, chunk) pair, spanning the support's
 * segment. `partStarts[k]` is the UTF-16 offset in the content where part k's text begins and `partTexts[k]` its
 * text (a segment's offsets count UTF-8 bytes from the start of its part, `partIndex`, default 0).
 */
export function geminiGrounding(metadata: unknown, partTexts: readonly string[], partStarts: readonly number[]): UrlAnnotation[] {
  const m = metadata as { groundingChunks?: Array<{ web?: { uri?: unknown; title?: unknown } }>; groundingSupports?: Array<{ segment?: { startIndex?: unknown; endIndex?: unknown; text?: unknown; partIndex?: unknown }; groundingChunkIndices?: unknown }> } | undefined;
  if (!m || !Array.isArray(m.groundingChunks) || !Array.isArray(m.groundingSupports)) return [];
  const out: UrlAnnotation[] = [];
  for (const s of m.groundingSupports) {
    const seg = s?.segment;
    if (!seg || !Array.isArray(s.groundingChunkIndices)) continue;
    const part = typeof seg.partIndex === "number" && seg.partIndex < partTexts.length ? seg.partIndex : 0;
    const text = partTexts[part] ?? "";
    const base = partStarts[part] ?? 0;
    const start = base + utf16Offset(text, typeof seg.startIndex === "number" ? seg.startIndex : 0);
    const end = base + utf16Offset(text, typeof seg.endIndex === "number" ? seg.endIndex : 0);
    for (const k of s.groundingChunkIndices) {
      const web = typeof k === "number" ? m.groundingChunks[k]?.web : undefined;
      if (!web || typeof web.uri !== "string") continue;
      out.push(urlAnnotation(web.uri, typeof web.title === "string" ? web.title : "", typeof seg.text === "string" ? seg.text : undefined, start, end));
    }
  }
  return out.sort((a, b) => a.url_citation.start_index - b.url_citation.start_index);
}
