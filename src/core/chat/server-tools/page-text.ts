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
  const { document } = parseHTML(raw);
  // Relative links become absolute: Readability resolves them against the document's base.
  if (document.head) {
    const baseEl = document.createElement("base");
    baseEl.setAttribute("href", finalUrl);
    document.head.prepend(baseEl);
  }
  const title = (document.title || "").trim() || null;
  let html: string | undefined;
  try {
    if (isProbablyReaderable(document as never)) html = new Readability(document as never).parse()?.content ?? undefined;
  } catch {
    html = undefined;
  }
  if (!html) {
    // Not an article: the whole body, without scripts and page chrome, links made absolute.
    const again = parseHTML(raw).document;
    for (const el of again.querySelectorAll("script, style, noscript, template, nav, footer, aside, iframe, form")) el.remove();
    for (const el of again.querySelectorAll("a[href], img[src]")) {
      const attr = el.hasAttribute("href") ? "href" : "src";
      try {
        el.setAttribute(attr, new URL(el.getAttribute(attr) ?? "", finalUrl).toString());
      } catch {
        /* left as written */
      }
    }
    html = again.body?.innerHTML ?? raw;
  }
  return { title, text: NodeHtmlMarkdown.translate(html ?? "").trim() };
}
