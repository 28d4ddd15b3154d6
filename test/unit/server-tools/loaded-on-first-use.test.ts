/**
 * The web_fetch and web_search tools' libraries (linkedom, Readability, node-html-markdown, the o200k
 * tokenizer, undici) are loaded when a tool first needs them, not when the chat modules are imported
 * (issue 24: a serving process that never fetches a page does not hold them); src/lib/on-first-use.ts.
 */
import { describe, expect, it, vi } from "vitest";
import { onFirstUse } from "../../../src/lib/on-first-use.js";

const loaded = vi.hoisted(() => [] as string[]);
vi.mock("linkedom", async (original) => (loaded.push("linkedom"), await original()));
vi.mock("@mozilla/readability", async (original) => (loaded.push("readability"), await original()));
vi.mock("node-html-markdown", async (original) => (loaded.push("node-html-markdown"), await original()));
vi.mock("gpt-tokenizer", async (original) => (loaded.push("gpt-tokenizer"), await original()));
vi.mock("undici", async (original) => (loaded.push("undici"), await original()));

describe("libraries loaded on first use", () => {
  it("importing the chat handler and the server tools loads none of them; the first page loads the HTML ones", async () => {
    await import("../../../src/core/chat/chat-handler.js");
    await import("../../../src/core/chat/server-tools/tools.js");
    await import("../../../src/core/chat/server-tools/search-engines.js");
    expect(loaded).toEqual([]);
    const { pageText } = await import("../../../src/core/chat/server-tools/page-text.js");
    // Plain text needs no parser.
    expect(await pageText(Buffer.from("just text"), "text/plain", "http://h.test/")).toEqual({ title: null, text: "just text" });
    expect(loaded).toEqual([]);
    const page = await pageText(Buffer.from("<html><head><title>T</title></head><body><p>Hello <b>there</b></p></body></html>"), "text/html", "http://h.test/");
    expect(page).toEqual({ title: "T", text: "Hello **there**" });
    expect([...loaded].sort()).toEqual(["linkedom", "node-html-markdown", "readability"]);
  });

  it("onFirstUse loads once, and a load that fails fails every use with its own error", async () => {
    let calls = 0;
    const ok = onFirstUse([], async () => ({ n: ++calls }));
    expect(calls).toBe(0);
    const [a, b] = await Promise.all([ok(), ok()]);
    expect(a).toBe(b);
    expect(calls).toBe(1);
    const broken = onFirstUse([], () => import("./no-such-module.js" as string));
    await expect(broken()).rejects.toThrow(/no-such-module/);
    await expect(broken()).rejects.toThrow(/no-such-module/);
  });

  it("a package missing from the install is still an error when the module declaring the loader is evaluated", () => {
    expect(() => onFirstUse([import.meta.resolve("no-such-package-for-portico")], async () => undefined)).toThrow(/no-such-package-for-portico/);
  });
});
