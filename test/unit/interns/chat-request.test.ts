import { create, fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { StreamChatRequestSchema } from "../../../src/gen/portico/interns/v1/interns_service_pb.js";
import { parseChatRequest, textOf } from "../../../src/core/interns/chat-request.js";
import { errorDetailOf } from "../../../src/core/errors.js";
import { toStreamChatRequest } from "../../../src/gateway/routes/interns.js";

const limits = { maxPromptChars: 100 };
const req = (body: unknown) => toStreamChatRequest("intern-1", body);

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    const ce = ConnectError.from(err);
    const d = errorDetailOf(ce);
    expect(d?.reason).toBe("bad_request");
    return d?.field;
  }
  throw new Error("expected a 400");
}

describe("intern chat request rules", () => {
  it("a user message starts a run, self-drive by default", () => {
    expect(parseChatRequest(req({ stream: true, messages: [{ role: "user", content: "hi" }] }), limits)).toEqual({
      kind: "prompt",
      prompt: "hi",
      approvalMode: "self-drive",
      sessionKey: undefined,
    });
  });

  it("refuses NUL characters in identifiers it stores or looks up (PostgreSQL text cannot hold them)", () => {
    expect(fieldOf(() => parseChatRequest(req({ stream: true, session_id: "a\u0000b", messages: [{ role: "user", content: "hi" }] }), limits))).toBe(
      "session_id",
    );
    expect(
      fieldOf(() =>
        parseChatRequest(
          req({ stream: true, session_id: "s", messages: [{ role: "tool", tool_call_id: "x\u0000", content: "allow_once" }] }),
          limits,
        ),
      ),
    ).toBe("messages[0].tool_call_id");
  });

  it("only the last message is read; the body session_id wins over the header", () => {
    const r = parseChatRequest(
      req({ stream: true, session_id: "b", approval_mode: "manual", messages: [{ role: "user", content: "old" }, { role: "user", content: [{ type: "text", text: "new" }] }] }),
      limits,
      "h",
    );
    expect(r).toMatchObject({ kind: "prompt", prompt: "new", approvalMode: "manual", sessionKey: "b" });
    expect(parseChatRequest(req({ stream: true, messages: [{ role: "user", content: "x" }] }), limits, "h")).toMatchObject({ sessionKey: "h" });
  });

  it("a tool message answers a question", () => {
    expect(
      parseChatRequest(req({ stream: true, session_id: "s", messages: [{ role: "tool", tool_call_id: "q1", content: " allow_once " }] }), limits),
    ).toEqual({ kind: "answer", interactionId: "q1", answer: "allow_once", sessionKey: "s" });
  });

  it.each([
    [{ stream: "yes", messages: [] }, "stream"],
    [[1, 2], "body"],
    [{ stream: true, messages: [{ role: "user", content: "x".repeat(101) }] }, "messages[0].content"],
    [{ stream: true, messages: [{ role: "user", content: "   " }] }, "messages[0].content"],
    [{ stream: true, messages: [{ role: "user", content: null }] }, "messages[0].content"],
    [{ stream: true, messages: [{ role: "user", content: [{ type: "image_url" }] }] }, "messages[0].content"],
    [{ stream: true, messages: [{ role: "tool", tool_call_id: "", content: "x" }], session_id: "s" }, "messages[0].tool_call_id"],
    [{ stream: true, messages: [{ role: "user", content: "x" }], session_id: "" }, "session_id"],
    [{ stream: true, messages: [{ role: "user", content: "x" }], approval_mode: "" }, "approval_mode"],
    [{ stream: true, messages: [null] }, "messages[0]"],
    [{ stream: true, messages: [{ role: "tool", tool_call_id: 7, content: "x" }], session_id: "s" }, "messages[0].tool_call_id"],
    [{ stream: true, messages: [{ role: "user", content: "x" }], model: 5 }, "model"],
  ])("400 naming the field for %j", (body, field) => {
    expect(fieldOf(() => parseChatRequest(req(body), limits))).toBe(field);
  });

  it("counts characters, not UTF-16 units, for the 256-character session_id", () => {
    const emoji = "😀".repeat(256);
    expect(parseChatRequest(req({ stream: true, session_id: emoji, messages: [{ role: "user", content: "x" }] }), limits)).toMatchObject({
      sessionKey: emoji,
    });
  });

  it("textOf joins text parts and refuses other shapes", () => {
    expect(textOf([{ type: "text", text: "a" }, { type: "text", text: "b" }])).toBe("ab");
    expect(textOf({ text: "a" })).toBeUndefined();
    expect(textOf(3)).toBeUndefined();
  });

  it("an empty Value from a gRPC client is a 400, not a crash", () => {
    const r = create(StreamChatRequestSchema, { internId: "i", stream: true, messages: [{ role: "user", content: {} }] });
    expect(fieldOf(() => parseChatRequest(r, limits))).toBe("messages[0].content");
    void fromJson;
  });
});
