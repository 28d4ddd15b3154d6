/** The file-parser plugin without a server: PDF text extraction (unpdf) with its bounds, and the plugin's choices per attempt. */
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { extractPdfText, PdfTextError } from "../../../src/lib/pdf-text.js";
import { createFileParserPlugin, refuseUnreadableFiles } from "../../../src/core/chat/pipeline/plugins/file-parser.js";
import { newCall, type Attempt, type ChatCall } from "../../../src/core/chat/pipeline/stage.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import type { Catalog } from "../../../src/core/catalog/catalog.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { makePdf, pdfDataUrl } from "../../helpers/pdf.js";

const problemOf = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => (e instanceof PdfTextError ? e.problem : String(e)));

describe("extractPdfText", () => {
  it("reads each page's text", async () => {
    const out = await extractPdfText(makePdf(["Hello from page one", "Second (page) text"]));
    expect(out.pages).toEqual(["Hello from page one", "Second (page) text"]);
    expect(out.characters).toBe("Hello from page one".length + "Second (page) text".length);
  });

  it("refuses what is not a PDF, a corrupt PDF, and the bounds", async () => {
    const bounds = { maxBytes: 1_000_000, maxPages: 5, timeoutMs: 10_000 };
    expect(await problemOf(extractPdfText(Buffer.from("plain text, not a pdf"), bounds))).toBe("not_pdf");
    expect(await problemOf(extractPdfText(makePdf(["x"]).subarray(0, 120), bounds))).toBe("corrupt");
    expect(await problemOf(extractPdfText(Buffer.from("%PDF-1.4\ngarbage garbage\n%%EOF"), bounds))).toBe("corrupt");
    expect(await problemOf(extractPdfText(makePdf(["a", "b"]), { ...bounds, maxBytes: 100 }))).toBe("too_many_bytes");
    expect(await problemOf(extractPdfText(makePdf(["1", "2", "3", "4", "5", "6"]), bounds))).toBe("too_many_pages");
    const many = makePdf(Array.from({ length: 40 }, (_, i) => `page ${i}`));
    expect(await problemOf(extractPdfText(many, { ...bounds, maxPages: 100, timeoutMs: 1 }))).toBe("timeout");
  });
});

const caller: Caller = {
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1",
  isManagement: false, internsProgramme: false,
};
const catalog = {
  model: (slug: string) =>
    ({
      "acme/reader": { slug: "acme/reader", architecture: { input_modalities: ["text", "file"], output_modalities: ["text"] } },
      "acme/text": { slug: "acme/text", architecture: { input_modalities: ["text"], output_modalities: ["text"] } },
    })[slug],
} as unknown as Catalog;
const attempt = (catalogModel: string | null, format: "openai" | "anthropic", request: CanonicalRequest): Attempt =>
  ({ provider: "p", requestedModel: catalogModel ?? "x/y", credentialId: "c", credentialSource: "shared", adapter: { format } as never, catalogModel, call: { model: "m", body: request, baseUrl: "", apiKey: "", signal: new AbortController().signal } }) as Attempt;

function callWith(content: unknown[], attempts: Array<[string | null, "openai" | "anthropic"]>): ChatCall {
  const request = { model: "acme/text", messages: [{ role: "user", content }] } as unknown as CanonicalRequest;
  const call = newCall(caller, new AbortController().signal, false, request);
  call.attempts = attempts.map(([m, f]) => attempt(m, f, request));
  return call;
}
const pdfPart = (pages: string[], filename = "report.pdf") => ({ type: "file", file: { filename, file_data: pdfDataUrl(makePdf(pages)) } });
const sent = (a: Attempt) => (a.call.body.messages as Array<{ content: Array<Record<string, unknown>> }>)[0]!.content;
const runPlugin = async (call: ChatCall, options: Record<string, unknown> = { id: "file-parser" }, bounds = {}) => {
  const report: Record<string, unknown> = { id: "file-parser" };
  await createFileParserPlugin({ catalog, bounds }).before!(call, { options, field: "plugins[0]", report: report as never });
  return report;
};
const refusal = async (p: Promise<unknown> | (() => void)) => {
  const err = typeof p === "function" ? (() => { try { p(); } catch (e) { return e; } })() : await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ConnectError);
  return { message: (err as ConnectError).rawMessage, field: errorDetailOf(err as ConnectError)?.field, code: (err as ConnectError).code };
};

describe("file-parser plugin", () => {
  it("text for the attempts that cannot read files, the part unchanged for those that can; reported without content", async () => {
    const call = callWith([{ type: "text", text: "Summarise" }, pdfPart(["Quarterly revenue rose", "Costs fell"])], [["acme/text", "openai"], ["acme/reader", "openai"], ["acme/reader", "anthropic"], [null, "openai"]]);
    const report = await runPlugin(call);
    const [text, reader, anthropic, uncatalogued] = call.attempts.map(sent);
    expect(text![1]).toEqual({ type: "text", text: '[file "report.pdf": PDF, 2 pages, text extracted]\n\nQuarterly revenue rose\n\nCosts fell' });
    expect(reader![1]!.type).toBe("file");
    expect(anthropic![1]!.type).toBe("text");
    expect(uncatalogued![1]!.type).toBe("text");
    expect(report).toEqual({ id: "file-parser", engine: "auto", native_attempts: 1, files: [{ part: "messages[0].content[1]", pages: 2, characters: 32 }] });
    expect(JSON.stringify(report)).not.toContain("revenue");
  });

  it("engine pdf-text (and cloudflare-ai) forces text; native leaves every part", async () => {
    for (const engine of ["pdf-text", "cloudflare-ai"]) {
      const call = callWith([pdfPart(["x"])], [["acme/reader", "openai"]]);
      await runPlugin(call, { id: "file-parser", pdf: { engine } });
      expect(sent(call.attempts[0]!)[0]!.type).toBe("text");
    }
    const call = callWith([pdfPart(["x"])], [["acme/text", "openai"]]);
    expect(await runPlugin(call, { id: "file-parser", pdf: { engine: "native" } })).toMatchObject({ engine: "native", files: [] });
    expect(sent(call.attempts[0]!)[0]!.type).toBe("file");
  });

  it("refuses an unsupported engine or pdf option, a URL, a file_id, a corrupt PDF and the bounds, naming the field", async () => {
    const one = () => callWith([{ type: "text", text: "hi" }, pdfPart(["a", "b", "c"])], [["acme/text", "openai"]]);
    let r = await refusal(runPlugin(one(), { id: "file-parser", pdf: { engine: "mistral-ocr" } }));
    expect(r.field).toBe("plugins[0].pdf.engine");
    r = await refusal(runPlugin(one(), { id: "file-parser", pdf: { max_pages: 3 } }));
    expect(r.field).toBe("plugins[0].pdf.max_pages");
    r = await refusal(runPlugin(callWith([{ type: "file", file: { file_data: "https://example.com/a.pdf" } }], [["acme/text", "openai"]])));
    expect(r).toMatchObject({ field: "messages[0].content[0].file.file_data" });
    expect(r.message).toContain("does not fetch");
    r = await refusal(runPlugin(callWith([{ type: "file", file: { file_id: "file-1" } }], [["acme/text", "openai"]])));
    expect(r.field).toBe("messages[0].content[0]");
    r = await refusal(runPlugin(callWith([{ type: "file", file: { file_data: `data:application/pdf;base64,${Buffer.from("%PDF-1.4 broken").toString("base64")}` } }], [["acme/text", "openai"]])));
    expect(r).toMatchObject({ field: "messages[0].content[0]", code: 3 });
    r = await refusal(runPlugin(one(), undefined, { maxPages: 2 }));
    expect(r).toMatchObject({ field: "messages[0].content[1]", code: 8 }); // resource exhausted: 413
    expect(r.message).toContain("has 3 pages, more than the 2 pages");
    r = await refusal(runPlugin(one(), undefined, { maxBytes: 50 }));
    expect(r).toMatchObject({ field: "messages[0].content[1]", code: 8 });
  });
});

describe("a file part without file-parser", () => {
  it("is refused for a model without file input or a translating adapter; passes to a reader or an uncatalogued model", async () => {
    let r = await refusal(() => refuseUnreadableFiles(callWith([pdfPart(["x"])], [["acme/reader", "openai"], ["acme/text", "openai"]]), catalog));
    expect(r.field).toBe("messages[0].content[0]");
    expect(r.message).toContain('model "acme/text" does not take file input');
    r = await refusal(() => refuseUnreadableFiles(callWith([pdfPart(["x"])], [["acme/reader", "anthropic"]]), catalog));
    expect(r.message).toContain("anthropic format");
    expect(() => refuseUnreadableFiles(callWith([pdfPart(["x"])], [["acme/reader", "openai"], [null, "openai"]]), catalog)).not.toThrow();
    expect(() => refuseUnreadableFiles(callWith([{ type: "text", text: "hi" }], [["acme/text", "anthropic"]]), catalog)).not.toThrow();
  });
});
