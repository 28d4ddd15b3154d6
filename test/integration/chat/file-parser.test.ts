/**
 * The file-parser plugin (docs/plugins.md) end to end: the `openai` client against Portico (SQLite) and the fake
 * OpenAI-compatible upstream. A PDF written by hand goes in as a `file` part with a data URL; a model without file
 * input gets its text, a model that reads files gets the part; refusals (corrupt, too many pages, unsupported
 * engine, a file part without the plugin) name the field and send nothing upstream.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { makePdf, pdfDataUrl } from "../../helpers/pdf.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

describe("file-parser (sqlite)", () => {
  let h: Harness;
  let upstream: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    upstream = await startFakeOpenAI();
    const ep = (id: string) => [{ provider: "ollama", model_id: id, context_length: 100_000, pricing: { prompt: "0.000001", completion: "0.000002" } }];
    const catalogFile = writeCatalogFile([
      { slug: "acme/plain", name: "Acme Plain", endpoints: ep("plain") },
      { slug: "acme/reader", name: "Acme Reader", architecture: { input_modalities: ["text", "file"], output_modalities: ["text"] }, endpoints: ep("reader") },
    ]);
    h = await startHarness({
      provider: "sqlite",
      env: { PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${upstream.url}/v1`, PORTICO_KEYLESS_PROVIDERS: "ollama", PORTICO_CATALOG_FILE: catalogFile },
    });
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
  });

  const withFile = (fileData: string) => [
    { role: "user", content: [{ type: "text", text: "What does the report say?" }, { type: "file", file: { filename: "report.pdf", file_data: fileData } }] },
  ];
  const report = pdfDataUrl(makePdf(["Quarterly revenue rose 12 percent", "Costs fell in Europe"]));
  const fail = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
  const field = (e: InstanceType<typeof OpenAI.APIError> | undefined) => (e?.error as { metadata?: { field?: string } }).metadata?.field;
  type Content = Array<{ type: string; text?: string; file?: unknown }>;
  const lastSent = () => (upstream.requests.at(-1)!.body.messages as Array<{ content: Content }>)[0]!.content;

  it("a model without file input gets the PDF's text; pages and characters reported on the answer and the generation", async () => {
    const res = await client.chat.completions.create({ model: "acme/plain", messages: withFile(report), plugins: [{ id: "file-parser" }] } as never);
    const content = lastSent();
    expect(content[0]).toEqual({ type: "text", text: "What does the report say?" });
    expect(content[1]!.type).toBe("text");
    expect(content[1]!.text).toContain("Quarterly revenue rose 12 percent\n\nCosts fell in Europe");
    expect(content[1]!.text).toContain('[file "report.pdf": PDF, 2 pages, text extracted]');
    const expected = [{ id: "file-parser", engine: "auto", files: [{ part: "messages[0].content[1]", pages: 2, characters: 53 }] }];
    expect((res as unknown as { plugins: unknown }).plugins).toEqual(expected);
    const recorded = await waitFor(`generation ${res.id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${res.id}`, { key: h.tenant.apiKey });
      return got.status === 200 ? got.json.data.plugins : undefined;
    });
    expect(recorded).toEqual(expected);
  });

  it("streaming works the same", async () => {
    const stream = await client.chat.completions.create({ model: "acme/plain", messages: withFile(report), stream: true, plugins: [{ id: "file-parser" }] } as never);
    let text = "";
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Hello, world");
    expect(lastSent()[1]!.text).toContain("Costs fell in Europe");
  });

  it("a model that reads files gets the part unchanged; pdf.engine pdf-text forces text", async () => {
    await client.chat.completions.create({ model: "acme/reader", messages: withFile(report), plugins: [{ id: "file-parser" }] } as never);
    expect(lastSent()[1]).toEqual({ type: "file", file: { filename: "report.pdf", file_data: report } });
    await client.chat.completions.create({ model: "acme/reader", messages: withFile(report), plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }] } as never);
    expect(lastSent()[1]!.text).toContain("Quarterly revenue");
  });

  it("refusals name the field and send nothing upstream: corrupt PDF, too many pages, unsupported engine, URL", async () => {
    const before = upstream.requests.length;
    const corrupt = `data:application/pdf;base64,${Buffer.from("%PDF-1.7\nthis is not really a pdf\n%%EOF").toString("base64")}`;
    let err = await fail(client.chat.completions.create({ model: "acme/plain", messages: withFile(corrupt), plugins: [{ id: "file-parser" }] } as never));
    expect(err?.status).toBe(400);
    expect(field(err)).toBe("messages[0].content[1]");
    expect(err?.message).toContain("could not be read as a PDF");

    const big = pdfDataUrl(makePdf(Array.from({ length: 201 }, (_, i) => `p${i}`)));
    err = await fail(client.chat.completions.create({ model: "acme/plain", messages: withFile(big), plugins: [{ id: "file-parser" }] } as never));
    expect(err?.status).toBe(413);
    expect(field(err)).toBe("messages[0].content[1]");
    expect(err?.message).toContain("has 201 pages, more than the 200 pages");

    err = await fail(client.chat.completions.create({ model: "acme/plain", messages: withFile(report), plugins: [{ id: "file-parser", pdf: { engine: "mistral-ocr" } }] } as never));
    expect(err?.status).toBe(400);
    expect(field(err)).toBe("plugins[0].pdf.engine");

    err = await fail(client.chat.completions.create({ model: "acme/plain", messages: withFile("https://example.com/report.pdf"), plugins: [{ id: "file-parser" }] } as never));
    expect(err?.status).toBe(400);
    expect(field(err)).toBe("messages[0].content[1].file.file_data");
    expect(upstream.requests.length).toBe(before);
  });

  it("without the plugin: a file part for a model without file input is refused (not dropped); a reader gets it", async () => {
    const before = upstream.requests.length;
    const err = await fail(client.chat.completions.create({ model: "acme/plain", messages: withFile(report) } as never));
    expect(err?.status).toBe(400);
    expect(field(err)).toBe("messages[0].content[1]");
    expect(err?.message).toContain("add the file-parser plugin");
    expect(upstream.requests.length).toBe(before);
    await client.chat.completions.create({ model: "acme/reader", messages: withFile(report) } as never);
    expect(lastSent()[1]!.type).toBe("file");
  });
});
