/**
 * A fetched page as text for the model (docs/plugins.md): HTML goes through Mozilla's Readability over a
 * linkedom DOM (main content, no scripts run) and node-html-markdown (tables kept as GFM tables); a page
 * Readability cannot read is converted whole (its body). Plain text, markdown, JSON and XML are given as they are.
 */
import { onFirstUse } from "../../../lib/on-first-use.js";

/** The three libraries (several MB of code and tables) are loaded with the first page, not at start-up. */
const libraries = onFirstUse([import.meta.resolve("@mozilla/readability"), import.meta.resolve("linkedom"), import.meta.resolve("node-html-markdown")], async () => {
  const [readability, linkedom, markdown] = await Promise.all([
    import("@mozilla/readability"),
    import("linkedom"),
    import("node-html-markdown"),
  ]);
  return { Readability: readability.Readability, isProbablyReaderable: readability.isProbablyReaderable, parseHTML: linkedom.parseHTML, NodeHtmlMarkdown: markdown.NodeHtmlMarkdown };
});

export interface PageText {
  title: string | null;
  text: string;
}

export async function pageText(body: Buffer, contentType: string, finalUrl: string): Promise<PageText> {
  const raw = body.toString("utf8");
  if (contentType !== "" && !/html/.test(contentType)) return { title: null, text: raw };
  const { Readability, isProbablyReaderable, parseHTML, NodeHtmlMarkdown } = await libraries();
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
