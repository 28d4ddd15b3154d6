/**
 * The console's pure browser modules, run in Node (which has the same web streams): the SSE parser
 * over a fetch body cut at awkward places, and the side-by-side line diff of preset versions.
 */
import { describe, expect, it } from "vitest";

interface Row {
  kind: "same" | "changed" | "removed" | "added";
  left?: { n: number; text: string };
  right?: { n: number; text: string };
}
type SseEvent = { event?: string; data?: string; id?: string; comment?: string };

// The modules are plain browser JavaScript (no type declarations): loaded by URL and typed here.
const diff = (await import(new URL("../../../src/console/lib/diff.js", import.meta.url).href)) as {
  sideBySide(a: string, b: string): Row[];
  stableJson(v: unknown): string;
};
const sse = (await import(new URL("../../../src/console/lib/sse.js", import.meta.url).href)) as {
  readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent>;
};

function bodyOf(pieces: Array<string | Uint8Array>): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const p of pieces) controller.enqueue(typeof p === "string" ? enc.encode(p) : p);
      controller.close();
    },
  });
}

async function events(pieces: Array<string | Uint8Array>): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of sse.readEvents(bodyOf(pieces))) out.push(e);
  return out;
}

describe("console SSE parser", () => {
  it("reads data events and comments, whatever the line endings and chunk boundaries", async () => {
    const text = 'data: {"a":1}\r\n\r\n: keepalive\n\ndata: {"b":2}\r\rdata: [DONE]\n\n';
    const whole = await events([text]);
    expect(whole).toEqual([
      { event: "message", data: '{"a":1}', id: undefined },
      { comment: "keepalive" },
      { event: "message", data: '{"b":2}', id: undefined },
      { event: "message", data: "[DONE]", id: undefined },
    ]);
    // Every split point, including between CR and LF, gives the same events.
    for (let i = 1; i < text.length; i += 1) expect(await events([text.slice(0, i), text.slice(i)])).toEqual(whole);
  });

  it("joins multi-line data, keeps event names and ids, drops an unterminated event", async () => {
    expect(await events(["event: note\nid: 7\ndata: one\ndata:two\n\ndata: cut"])).toEqual([{ event: "note", data: "one\ntwo", id: "7" }]);
  });

  it("decodes UTF-8 split across chunks", async () => {
    const bytes = new TextEncoder().encode("data: héllo ✓\n\n");
    const cut = bytes.indexOf(0xc3) + 1;
    expect(await events([bytes.slice(0, cut), bytes.slice(cut)])).toEqual([{ event: "message", data: "héllo ✓", id: undefined }]);
  });
});

describe("console version diff", () => {
  it("sorts keys at every level so versions line up", () => {
    expect(diff.stableJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: null } })).toBe(
      JSON.stringify({ a: { c: null, d: [{ y: 2, z: 1 }] }, b: 1 }, null, 2),
    );
  });

  it("pairs removed and added lines into changed rows and numbers each side", () => {
    const rows = diff.sideBySide("a\nb\nc\nd", "a\nB\nc\nd\ne");
    expect(rows.map((r) => r.kind)).toEqual(["same", "changed", "same", "same", "added"]);
    expect(rows[1]).toEqual({ kind: "changed", left: { n: 2, text: "b" }, right: { n: 2, text: "B" } });
    expect(rows[4]).toEqual({ kind: "added", left: undefined, right: { n: 5, text: "e" } });
  });

  it("shows removals on the left only, and identical texts as all same", () => {
    const rows = diff.sideBySide("x\ny\nz", "x\nz");
    expect(rows.map((r) => r.kind)).toEqual(["same", "removed", "same"]);
    expect(rows[2]).toEqual({ kind: "same", left: { n: 3, text: "z" }, right: { n: 2, text: "z" } });
    expect(diff.sideBySide("q\nr", "q\nr").every((r) => r.kind === "same")).toBe(true);
  });
});
