/**
 * A fetched page as text for the model (docs/plugins.md): HTML goes through Mozilla's Readability over a
 * linkedom DOM (main content, no scripts run) and node-html-markdown (tables kept as GFM tables); a page
 * Readability cannot read is converted whole (its body). Plain text, markdown, JSON and XML are given as they are.
 */
import { Readability, isProbablyReaderable } from "@mozilla/readability";
import { parseHTML } from "linkedom";
import { NodeHtmlMarkdown } from "node-html-markdown";

export interface PageText {
  title: string | null;
  text: string;
}

export function pageText(body: Buffer, contentType: string, finalUrl: string): PageText {
  const raw = body.toString("utf8");
  if (contentType !== "" && !/html/.test(contentType)) return { title: null, text: raw };
  // Relative links become absolute: Readability keeps them as written.
  const withBase = /<head[^>]*>/i.test(raw) ? raw.replace(/<head([^>]*)>/i, `<head$1><base href="${escapeAttr(finalUrl)}">`) : `<base href="${escapeAttr(finalUrl)}">${raw}`;
  const { document } = parseHTML(withBase);
  const title = (document.title || "").trim() || null;
  let html: string | undefined;
  try {
    if (isProbablyReaderable(document as never)) html = new Readability(document as never).parse()?.content ?? undefined;
  } catch {
    html = undefined;
  }
  if (!html) {
    const again = parseHTML(withBase).document;
    for (const el of again.querySelectorAll("script, style, noscript, template")) el.remove();
    html = again.body?.innerHTML ?? withBase;
  }
  return { title, text: NodeHtmlMarkdown.translate(html ?? "").trim() };
}

function escapeAttr(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}
