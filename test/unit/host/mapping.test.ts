/** Pure ACP → link mappings. */
import { describe, expect, it } from "vitest";
import type { AnyMessage } from "@agentclientprotocol/sdk";
import {
  modelFromSessionState,
  offeredKinds,
  operationForToolKind,
  optionIdForKind,
  repairIncomingMessage,
  selfDriveOptionId,
  usageFromTurn,
  requestedTool,
  MAX_TOOL_INPUT_BYTES,
  usdCost,
  utf8Tail,
} from "../../../src/host/mapping.js";

describe("question mapping", () => {
  it("maps tool kinds to operations", () => {
    expect(operationForToolKind("execute")).toBe("shell");
    expect(operationForToolKind("switch_mode")).toBe("mode");
    for (const k of ["edit", "delete", "move", "read", "search", "fetch"]) expect(operationForToolKind(k)).toBe(k);
    expect(operationForToolKind("think")).toBeUndefined();
    expect(operationForToolKind("other")).toBeUndefined();
    expect(operationForToolKind(undefined)).toBeUndefined();
    expect(operationForToolKind("nonsense")).toBeUndefined();
  });

  it("lists distinct offered kinds in canonical order and answers by the agent's option id", () => {
    const options = [
      { optionId: "abort", kind: "reject_once" },
      { optionId: "approved-always", kind: "allow_always" },
      { optionId: "approved", kind: "allow_once" },
      { optionId: "approved-2", kind: "allow_once" },
      { optionId: "weird", kind: "maybe" },
    ];
    expect(offeredKinds(options)).toEqual(["allow_once", "allow_always", "reject_once"]);
    expect(optionIdForKind(options, "allow_once")).toBe("approved");
    expect(optionIdForKind(options, "reject_always")).toBeUndefined();
  });

  it("self-drive prefers allow_once, uses allow_always only when it is the only allow", () => {
    expect(selfDriveOptionId([{ optionId: "aa", kind: "allow_always" }, { optionId: "a", kind: "allow_once" }])).toBe("a");
    expect(selfDriveOptionId([{ optionId: "aa", kind: "allow_always" }, { optionId: "r", kind: "reject_once" }])).toBe("aa");
    expect(selfDriveOptionId([{ optionId: "r", kind: "reject_once" }])).toBe("r");
    expect(selfDriveOptionId([])).toBeUndefined();
  });
});

describe("usage and model", () => {
  it("maps prompt usage and the cost delta", () => {
    expect(usageFromTurn(undefined, undefined)).toBeUndefined();
    expect(usageFromTurn({ stopReason: "end_turn", usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15, cachedReadTokens: 2 } }, 0.5)).toEqual({
      promptTokens: 10n,
      completionTokens: 5n,
      totalTokens: 15n,
      cachedTokens: 2n,
      cost: 0.5,
    });
    expect(usageFromTurn({ usage: { inputTokens: 1, outputTokens: 2 } }, undefined)).toEqual({ promptTokens: 1n, completionTokens: 2n, totalTokens: 3n });
    expect(usageFromTurn(undefined, 0.1)).toEqual({ promptTokens: 0n, completionTokens: 0n, totalTokens: 0n, cost: 0.1 });
    expect(usdCost({ amount: 1.5, currency: "USD" })).toBe(1.5);
    expect(usdCost({ amount: 1.5, currency: "EUR" })).toBeUndefined();
    expect(usdCost(null)).toBeUndefined();
  });

  it("reads a turn's tokens from the prompt result's _meta.quota when it has no usage (gemini-cli)", () => {
    // gemini-cli 0.61: snake_case counts, no total.
    const gemini = { stopReason: "end_turn", _meta: { quota: { token_count: { input_tokens: 120, output_tokens: 30 }, model_usage: [] } } };
    expect(usageFromTurn(gemini, undefined)).toEqual({ promptTokens: 120n, completionTokens: 30n, totalTokens: 150n });
    // Adapters that write the same object in camelCase, with cached input tokens and a total.
    const camel = { stopReason: "end_turn", _meta: { quota: { token_count: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 40, totalTokens: 55 } } } };
    expect(usageFromTurn(camel, 0.2)).toEqual({ promptTokens: 10n, completionTokens: 5n, totalTokens: 55n, cachedTokens: 40n, cost: 0.2 });
    // `usage` wins when both are present; a quota without counts is no usage.
    expect(usageFromTurn({ usage: { inputTokens: 1, outputTokens: 1 }, _meta: gemini._meta }, undefined)).toMatchObject({ promptTokens: 1n });
    expect(usageFromTurn({ _meta: { quota: { token_count: {} } } }, undefined)).toBeUndefined();
    expect(usageFromTurn({ _meta: { quota: "n/a" } }, undefined)).toBeUndefined();
    expect(usageFromTurn({ _meta: { quota: { token_count: { input_tokens: -3, output_tokens: "7" } } } }, undefined)).toBeUndefined();
  });

  it("says what a permission request asks to run: title, kind, command line and input as ACP gives them", () => {
    // claude-agent-acp, Bash: the title is the command; rawInput {command, description}.
    expect(requestedTool({ title: "npm test", rawInput: { command: "npm   test", description: "Run tests" } }, "execute")).toEqual({
      title: "npm test",
      kind: "execute",
      command: "npm test",
      input: { command: "npm   test", description: "Run tests" },
    });
    // codex-acp: an argv array.
    expect(requestedTool({ title: "git push", rawInput: { command: ["git", "push"], cwd: "/w" } }, "execute")).toMatchObject({ command: "git push" });
    // An edit names no command: the title and input say what it is.
    expect(requestedTool({ title: "Write a.txt", rawInput: { path: "a.txt" } }, "edit")).toEqual({ title: "Write a.txt", kind: "edit", input: { path: "a.txt" } });
    // An input too large to carry is left out; the command stays.
    const big = requestedTool({ title: "x", rawInput: { command: "cat", blob: "a".repeat(MAX_TOOL_INPUT_BYTES) } }, undefined);
    expect(big).toEqual({ title: "x", command: "cat" });
    expect(requestedTool({}, undefined)).toBeUndefined();
  });

  it("reads the model from configOptions, else legacy models", () => {
    expect(modelFromSessionState({ configOptions: [{ id: "m", category: "mode", currentValue: "x" }, { id: "model", category: "model", currentValue: "opus" }] })).toBe("opus");
    expect(modelFromSessionState({ models: { currentModelId: "gpt" } })).toBe("gpt");
    expect(modelFromSessionState({})).toBeUndefined();
  });
});

describe("message tap", () => {
  it("repairs usage_update with used:null and leaves other messages alone", () => {
    const msg = { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "usage_update", used: null, size: 100 } } } as unknown as AnyMessage;
    expect(repairIncomingMessage(msg)).toBe(true);
    expect((msg as unknown as { params: { update: { used: number } } }).params.update.used).toBe(0);
    const other = { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "agent_message_chunk" } } } as unknown as AnyMessage;
    expect(repairIncomingMessage(other)).toBe(false);
  });
});

describe("utf8Tail", () => {
  it("keeps the tail from a character boundary", () => {
    const buf = Buffer.from("aéé€", "utf8"); // 1 + 2 + 2 + 3 bytes
    expect(utf8Tail(buf, 100).toString()).toBe("aéé€");
    expect(utf8Tail(buf, 6).toString()).toBe("é€");
    expect(utf8Tail(buf, 4).toString()).toBe("€");
    expect(utf8Tail(buf, 2).toString()).toBe("");
  });
});
