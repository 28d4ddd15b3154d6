/**
 * Plugin "file-parser" (docs/plugins.md): PDF `file` content parts (`{type: "file", file: {filename?, file_data}}`)
 * become text parts for the planned attempts whose model cannot read files, extracted here with unpdf
 * (src/lib/pdf-text.ts). An attempt "reads files" when its adapter speaks the OpenAI format (which forwards
 * `file` parts as they are) and its catalog model lists `file` among its input modalities; an uncatalogued
 * model is not known to, so it gets text.
 *
 * `pdf.engine`: absent → text for the attempts that cannot read files, the part unchanged for those that can;
 * `pdf-text` or `cloudflare-ai` (its successor's name) → text for every attempt (the extraction is local either
 * way: nothing is sent to Cloudflare); `native` → every part unchanged (an attempt that cannot read files is
 * then refused by {@link refuseUnreadableFiles}); `mistral-ocr` → 400 naming `plugins[i].pdf.engine` (no OCR).
 * Another key in `pdf` → 400 naming it.
 *
 * Inputs read: `file_data` as a base64 data URL. An http(s) URL, or a `file_id`, is not fetched (no safe
 * fetcher for caller-given addresses here): when text is needed it is refused with 400 naming the part. The
 * bounds (bytes, pages, time; DEFAULT_PDF_BOUNDS) are refused with 413 (bytes, pages) or 400 (time, corrupt,
 * not a PDF) naming the part, `messages[i].content[j]`.
 *
 * The report (no content): `engine`, and per file turned into text `{part, pages, characters}` in `files`;
 * `native_attempts` when some attempts got the parts unchanged.
 */
import { invalidArgument, Reason, serviceError } from "../../../errors.js";
import { DEFAULT_PDF_BOUNDS, extractPdfText, PdfTextError, type PdfBounds } from "../../../../lib/pdf-text.js";
import type { Catalog } from "../../../catalog/catalog.js";
import type { Attempt, ChatCall } from "../stage.js";
import type { CanonicalRequest } from "../../model.js";
import type { Plugin } from "./types.js";

type Message = Record<string, unknown>;
type Part = Record<string, unknown>;

export const SUPPORTED_PDF_ENGINES = ["pdf-text", "cloudflare-ai", "native"] as const;

export interface FileParserDeps {
  /** The model catalog (input modalities); absent: no model is known to read files. */
  catalog?: Catalog;
  bounds?: Partial<PdfBounds>;
}

/** Whether attempt `a` carries `file` parts to a model that reads them. */
export function readsFiles(a: Attempt, catalog: Catalog | undefined): boolean {
  if (a.adapter.format !== "openai") return false; // the Anthropic and Gemini adapters do not translate `file` parts
  if (!a.catalogModel) return false;
  return catalog?.model(a.catalogModel)?.architecture.input_modalities.includes("file") === true;
}

/** Every `file` part of `messages`, with its wire path. */
export function fileParts(messages: readonly Message[]): Array<{ path: string; part: Part; message: number; index: number }> {
  const out: Array<{ path: string; part: Part; message: number; index: number }> = [];
  messages.forEach((m, i) => {
    if (!Array.isArray(m?.content)) return;
    (m.content as Part[]).forEach((p, j) => {
      if (p?.type === "file") out.push({ path: `messages[${i}].content[${j}]`, part: p, message: i, index: j });
    });
  });
  return out;
}

/**
 * Without file-parser (or with engine `native`): a `file` part planned for an attempt that cannot carry it — a
 * translating adapter, which would drop it, or a catalog model without `file` input — is refused with 400 naming
 * the part, before anything is sent. An uncatalogued OpenAI-format model gets it as sent (its provider decides).
 */
export function refuseUnreadableFiles(call: ChatCall, catalog: Catalog | undefined): void {
  for (const a of call.attempts) {
    const messages = (a.call.body.messages ?? call.request.messages ?? []) as Message[];
    const files = fileParts(messages);
    if (files.length === 0) continue;
    const known = a.catalogModel ? catalog?.model(a.catalogModel) : undefined;
    const why =
      a.adapter.format !== "openai" ? `provider "${a.provider}" is called in the ${a.adapter.format} format, which does not carry file parts here`
      : known && !known.architecture.input_modalities.includes("file") ? `model "${known.slug}" does not take file input (its input modalities: ${known.architecture.input_modalities.join(", ")})`
      : undefined;
    if (why) {
      throw invalidArgument(files[0]!.path, `${files[0]!.path} is a file part, but ${why}; add the file-parser plugin ({"id": "file-parser"}) to send a PDF as text, or choose a model that reads files`);
    }
  }
}

function decodeDataUrl(url: string): Buffer | undefined {
  const match = /^data:([^,]*?),(.*)$/s.exec(url);
  if (!match) return undefined;
  if (!/;base64$/i.test(match[1]!)) return Buffer.from(decodeURIComponent(match[2]!), "latin1");
  return Buffer.from(match[2]!, "base64");
}

export function createFileParserPlugin(deps: FileParserDeps = {}): Plugin {
  const bounds: PdfBounds = { ...DEFAULT_PDF_BOUNDS, ...deps.bounds };
  return {
    id: "file-parser",
    // After moderation (which sees the input as sent), before context-compression (which then counts the text).
    order: 15,
    async before(call, run) {
      const pdf = (run.options.pdf ?? {}) as Record<string, unknown>;
      for (const key of Object.keys(pdf)) {
        if (key !== "engine") throw invalidArgument(`${run.field}.pdf.${key}`, `${run.field}.pdf.${key} is not supported by this deployment (the supported pdf option is engine; docs/plugins.md)`);
      }
      const engine = pdf.engine as string | undefined;
      if (engine !== undefined && !(SUPPORTED_PDF_ENGINES as readonly string[]).includes(engine)) {
        throw invalidArgument(
          `${run.field}.pdf.engine`,
          `${run.field}.pdf.engine "${engine}" is not supported by this deployment (supported: ${SUPPORTED_PDF_ENGINES.join(", ")}; text extraction only, no OCR; docs/plugins.md)`,
        );
      }
      run.report.engine = engine ?? "auto";
      const files: Array<Record<string, unknown>> = [];
      run.report.files = files;
      if (engine === "native") return;
      const forced = engine === "pdf-text" || engine === "cloudflare-ai";
      const textAttempts = call.attempts.filter((a) => forced || !readsFiles(a, deps.catalog));
      const native = call.attempts.length - textAttempts.length;
      if (native > 0) run.report.native_attempts = native;
      if (textAttempts.length === 0) return;
      const messages = (call.request.messages ?? []) as Message[];
      const found = fileParts(messages);
      if (found.length === 0) return;
      const replaced = new Map<string, Part>();
      for (const { path, part } of found) {
        const file = (part.file ?? {}) as Record<string, unknown>;
        const data = file.file_data;
        const filename = typeof file.filename === "string" && file.filename !== "" ? file.filename : undefined;
        if (typeof data !== "string" || data === "") {
          const what = typeof file.file_id === "string" ? "a file_id (uploaded files are not kept here)" : "no file.file_data";
          throw invalidArgument(path, `${path} has ${what}: file-parser reads PDFs given as a base64 data URL in file.file_data`);
        }
        if (!data.startsWith("data:")) {
          const kind = /^https?:/i.test(data) ? "a URL, which this deployment does not fetch" : "neither a data URL nor a URL";
          throw invalidArgument(`${path}.file.file_data`, `${path}.file.file_data is ${kind}: file-parser reads PDFs given as a base64 data URL (data:application/pdf;base64,…)`);
        }
        const bytes = decodeDataUrl(data);
        if (!bytes) throw invalidArgument(`${path}.file.file_data`, `${path}.file.file_data is not a well-formed data URL`);
        let text;
        try {
          text = await extractPdfText(bytes, bounds);
        } catch (err) {
          if (!(err instanceof PdfTextError)) throw err;
          const message = `${path} (file-parser): the file ${err.message}`;
          if (err.problem === "too_many_bytes" || err.problem === "too_many_pages") throw serviceError(Reason.PAYLOAD_TOO_LARGE, message, { field: path });
          throw invalidArgument(path, message);
        }
        const header = `[file${filename ? ` ${JSON.stringify(filename)}` : ""}: PDF, ${text.pages.length} page${text.pages.length === 1 ? "" : "s"}, text extracted]`;
        replaced.set(path, { type: "text", text: `${header}\n\n${text.pages.join("\n\n")}` });
        files.push({ part: path, pages: text.pages.length, characters: text.characters });
      }
      const converted = messages.map((m, i) => {
        if (!Array.isArray(m?.content)) return m;
        const content = (m.content as Part[]).map((p, j) => replaced.get(`messages[${i}].content[${j}]`) ?? p);
        return { ...m, content };
      });
      // The converted messages are built as Records (parts replaced by their text): a narrow cast.
      for (const a of textAttempts) a.call = { ...a.call, body: { ...a.call.body, messages: converted as CanonicalRequest["messages"] } };
    },
  };
}
