/**
 * PDF → text for the file-parser plugin (docs/plugins.md), with unpdf (pdf.js 5.6 bundled; no worker, no canvas;
 * pinned at 1.7.0 because 1.8 needs Node 22). Text only: a scanned PDF gives empty pages (no OCR).
 *
 * Bounds, each refused with a typed error the plugin turns into a refusal naming the content part:
 * - `maxBytes`: the decoded file's size (checked before pdf.js sees it);
 * - `maxPages`: the document's page count (checked before any page is read);
 * - `timeoutMs`: the whole extraction. pdf.js runs on this thread: the deadline is checked between pages and
 *   raced against each page's read, then the document is destroyed, so a page that spins synchronously inside
 *   pdf.js is not interrupted (the bound is on waiting, not on CPU).
 */
import { getDocumentProxy } from "unpdf";

export interface PdfBounds {
  maxBytes: number;
  maxPages: number;
  timeoutMs: number;
}

export const DEFAULT_PDF_BOUNDS: PdfBounds = { maxBytes: 10 * 1024 * 1024, maxPages: 200, timeoutMs: 15_000 };

export type PdfProblem = "not_pdf" | "corrupt" | "too_many_bytes" | "too_many_pages" | "timeout";

export class PdfTextError extends Error {
  constructor(
    readonly problem: PdfProblem,
    message: string,
  ) {
    super(message);
    this.name = "PdfTextError";
  }
}

export interface PdfText {
  /** Each page's text, in order. */
  pages: string[];
  /** Characters over all pages. */
  characters: number;
}

/** Whether `bytes` starts like a PDF (`%PDF-` within the first 1024 bytes, as readers allow). */
export function looksLikePdf(bytes: Uint8Array): boolean {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 1024)).toString("latin1");
  return head.includes("%PDF-");
}

type PageLike = { getTextContent(): Promise<{ items: Array<{ str?: string; hasEOL?: boolean }> }> };

function pageText(items: Array<{ str?: string; hasEOL?: boolean }>): string {
  let out = "";
  for (const item of items) {
    if (typeof item.str !== "string") continue;
    out += item.str;
    if (item.hasEOL) out += "\n";
  }
  return out.trim();
}

/** The text of each page of `bytes`, within `bounds`; throws {@link PdfTextError}. */
export async function extractPdfText(bytes: Uint8Array, bounds: PdfBounds = DEFAULT_PDF_BOUNDS): Promise<PdfText> {
  if (bytes.byteLength > bounds.maxBytes) {
    throw new PdfTextError("too_many_bytes", `is ${bytes.byteLength} bytes, more than the ${bounds.maxBytes} bytes a PDF may have here`);
  }
  if (!looksLikePdf(bytes)) throw new PdfTextError("not_pdf", "is not a PDF (no %PDF- header)");
  const deadline = Date.now() + bounds.timeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PdfTextError("timeout", `could not be read within ${bounds.timeoutMs} ms`)), bounds.timeoutMs);
    timer.unref?.();
  });
  expired.catch(() => undefined);
  let doc: Awaited<ReturnType<typeof getDocumentProxy>> | undefined;
  try {
    // A copy: pdf.js transfers (detaches) the buffer it is given. verbosity 0: errors only, no console warnings.
    try {
      doc = await Promise.race([getDocumentProxy(new Uint8Array(bytes), { verbosity: 0, isEvalSupported: false, stopAtErrors: true }), expired]);
    } catch (err) {
      if (err instanceof PdfTextError) throw err;
      throw new PdfTextError("corrupt", `could not be read as a PDF (${err instanceof Error ? err.name : "error"})`);
    }
    if (doc.numPages > bounds.maxPages) {
      throw new PdfTextError("too_many_pages", `has ${doc.numPages} pages, more than the ${bounds.maxPages} pages a PDF may have here`);
    }
    const pages: string[] = [];
    let characters = 0;
    for (let n = 1; n <= doc.numPages; n++) {
      if (Date.now() > deadline) throw new PdfTextError("timeout", `could not be read within ${bounds.timeoutMs} ms`);
      try {
        const page = (await Promise.race([doc.getPage(n), expired])) as unknown as PageLike;
        const content = await Promise.race([page.getTextContent(), expired]);
        const text = pageText(content.items);
        pages.push(text);
        characters += text.length;
      } catch (err) {
        if (err instanceof PdfTextError) throw err;
        throw new PdfTextError("corrupt", `could not be read as a PDF: page ${n} is damaged (${err instanceof Error ? err.name : "error"})`);
      }
    }
    return { pages, characters };
  } finally {
    clearTimeout(timer);
    if (doc) void doc.destroy().catch(() => undefined);
  }
}
