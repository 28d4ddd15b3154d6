/**
 * The pure parts of native web search and of the dialects' citations (docs/plugins.md, "Native search", "The other
 * dialects"): UTF-8 byte offsets to UTF-16, Gemini grounding over several parts, Anthropic citation spans, the
 * Messages text split by cited spans (overlaps), the Responses annotation shape.
 */
import { describe, expect, it } from "vitest";
import { anthropicCitation, geminiGrounding, utf16Offset } from "../../../src/core/chat/providers/native-search.js";
import { citedTextBlocks } from "../../../src/core/chat/dialects/anthropic-messages.js";
import { responsesAnnotation } from "../../../src/core/chat/dialects/openai-responses.js";

describe("native search", () => {
  it("utf16Offset: one- to four-byte characters (a surrogate pair counts 2 in UTF-16)", () => {
    const text = "aé€😀b";
    expect([0, 1, 3, 6, 10, 11].map((b) => utf16Offset(text, b))).toEqual([0, 1, 2, 3, 5, 6]);
    expect(utf16Offset(text, 99)).toBe(text.length);
  });

  it("geminiGrounding: segments of the second part are offset by the first part's text; unknown chunks skipped", () => {
    const parts = ["Über ", "Paris is the capital."];
    const meta = {
      groundingChunks: [{ web: { uri: "https://a.example", title: "a" } }, { retrievedContext: {} }],
      groundingSupports: [
        { segment: { partIndex: 1, startIndex: 0, endIndex: Buffer.byteLength("Paris is the capital."), text: "Paris is the capital." }, groundingChunkIndices: [0, 1, 7] },
        { segment: { endIndex: Buffer.byteLength("Über"), text: "Über" }, groundingChunkIndices: [0] },
      ],
    };
    const got = geminiGrounding(meta, parts, [0, parts[0]!.length]);
    expect(got.map((a) => [a.url_citation.start_index, a.url_citation.end_index, a.url_citation.content])).toEqual([
      [0, 4, "Über"],
      [5, 26, "Paris is the capital."],
    ]);
    expect(geminiGrounding(undefined, parts, [0])).toEqual([]);
  });

  it("anthropicCitation: only web_search_result_location entries", () => {
    expect(anthropicCitation({ type: "char_location", cited_text: "x" }, 0, 1)).toBeUndefined();
    expect(anthropicCitation({ type: "web_search_result_location", url: "https://u.example", title: "T", cited_text: "c" }, 3, 9)).toEqual({
      type: "url_citation", url_citation: { url: "https://u.example", title: "T", content: "c", start_index: 3, end_index: 9 },
    });
  });
});

describe("dialect citations", () => {
  const ann = (url: string, start: number, end: number, content?: string) => ({ type: "url_citation", url_citation: { url, title: url, ...(content ? { content } : {}), start_index: start, end_index: end } });

  it("Messages: cited spans become their own blocks; an overlapping span joins the previous block; bad spans ignored", () => {
    const text = "One two three four";
    const blocks = citedTextBlocks(text, [ann("https://b", 8, 13), ann("https://a", 4, 7, "snippet"), ann("https://c", 5, 9), ann("https://bad", 10, 99)]);
    expect(blocks).toEqual([
      { type: "text", text: "One " },
      {
        type: "text",
        text: "two",
        citations: [
          { type: "web_search_result_location", url: "https://a", title: "https://a", encrypted_index: "", cited_text: "snippet" },
          { type: "web_search_result_location", url: "https://c", title: "https://c", encrypted_index: "", cited_text: "wo t" },
        ],
      },
      { type: "text", text: " " },
      { type: "text", text: "three", citations: [{ type: "web_search_result_location", url: "https://b", title: "https://b", encrypted_index: "", cited_text: "three" }] },
      { type: "text", text: " four" },
    ]);
    expect(blocks.map((b) => b.text).join("")).toBe(text);
    expect(citedTextBlocks(text, undefined)).toEqual([{ type: "text", text }]);
  });

  it("Responses: the flat url_citation shape", () => {
    expect(responsesAnnotation(ann("https://a", 1, 4, "x"))).toEqual({ type: "url_citation", start_index: 1, end_index: 4, url: "https://a", title: "https://a" });
    expect(responsesAnnotation({ type: "file_citation" })).toBeUndefined();
  });
});
