import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  PRESET_CONFIG_FIELDS,
  checkSlug,
  deriveSystemPrompt,
  parseVersionNumber,
  pickPresetConfig,
} from "../../../src/core/presets/preset-rules.js";
import { RuleViolation } from "../../../src/contract/requests/kit.js";
import { chatRequestJson } from "../../../src/core/presets/presets-handler.js";
import { createChatRequestValidator, type ChatRequestValidator } from "../../../src/contract/requests/chat-request.js";
import {
  PresetConflictError,
  createPresetsRepository,
  isRetryableWriteError,
} from "../../../src/core/presets/presets-repository.js";
import { CreatePresetVersionRequestSchema } from "../../../src/gen/portico/presets/v1/presets_service_pb.js";
import { statusFor } from "../../../src/gateway/errors.js";
import { conflict } from "../../../src/core/errors.js";
import type { Db } from "../../../src/db/client.js";

describe("slug rule", () => {
  it.each(["a", "my-preset", "v1.2_beta", "0abc", "a".repeat(100), "A", "My-Preset", "~user", "-a", ".a", "_a", "a..b"])("accepts %j", (slug) => {
    expect(checkSlug(slug)).toBe(slug);
  });
  it.each(["", ".", "..", "a b", "a/b", "a%20", "é", "a".repeat(101), "a?b", "a#b", "a:b", "a@b", "a+b"])(
    "rejects %j",
    (slug) => {
      expect(() => checkSlug(slug)).toThrow(RuleViolation);
    },
  );
});

describe("preset config allow-list", () => {
  const STORED = [...PRESET_CONFIG_FIELDS];
  const DROPPED = [
    "messages", "stream", "stream_options", "prompt", "session_id", "user", "trace", "metadata", "debug",
    "prediction", "prompt_cache_key", "prompt_cache_options", "route", "frobnicate", "id", "version",
    "workspace_id", "status", "preset_id", "designated_version_id", "created_at", "system_prompt",
  ];

  it.each(STORED)("stores %s as sent", (key) => {
    const value = { nested: [1, null, "x"] };
    expect(pickPresetConfig({ [key]: value })).toEqual({ [key]: value });
  });
  it.each(DROPPED)("drops %s", (key) => {
    expect(pickPresetConfig({ [key]: "x", model: "m" })).toEqual({ model: "m" });
  });
  it("keeps the documented set", () => {
    expect(STORED.sort()).toEqual(
      [
        "cache", "cache_control", "frequency_penalty", "image_config", "logit_bias", "logprobs", "max_completion_tokens",
        "max_tokens", "min_p", "modalities", "model", "models", "parallel_tool_calls", "plugins", "presence_penalty",
        "provider", "reasoning", "reasoning_effort", "repetition_penalty", "response_format", "seed", "service_tier",
        "stop", "stop_server_tools_when", "temperature", "tool_choice", "tools", "top_a", "top_k", "top_logprobs", "top_p",
      ].sort(),
    );
  });
  it("keeps keys as sent, in the order sent, with values untouched (null stays null, absent stays absent)", () => {
    const body = { stream: false, temperature: 0.7, messages: [], stop: null, model: "m", seed: 0, tools: [] };
    const config = pickPresetConfig(body);
    expect(config).toEqual({ temperature: 0.7, stop: null, model: "m", seed: 0, tools: [] });
    expect(Object.keys(config)).toEqual(["temperature", "stop", "model", "seed", "tools"]);
    expect(JSON.stringify(config)).toBe('{"temperature":0.7,"stop":null,"model":"m","seed":0,"tools":[]}');
    expect("top_p" in config).toBe(false);
  });
});

describe("system prompt", () => {
  it.each<[string, unknown, string | null]>([
    ["system string", [{ role: "system", content: "S" }, { role: "user", content: "u" }], "S"],
    ["first system wins", [{ role: "system", content: "A" }, { role: "system", content: "B" }], "A"],
    ["system beats an earlier developer", [{ role: "developer", content: "D" }, { role: "system", content: "S" }], "S"],
    ["developer when no system", [{ role: "user", content: "u" }, { role: "developer", content: "D" }], "D"],
    ["text parts joined with newline", [{ role: "system", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }], "a\nb"],
    ["non-text parts skipped", [{ role: "system", content: [{ type: "text", text: "a" }, { type: "image_url" }] }], "a"],
    ["empty string kept", [{ role: "system", content: "" }], ""],
    ["none", [{ role: "user", content: "u" }, { role: "assistant", content: "a" }], null],
    ["not an array", undefined, null],
  ])("%s", (_name, messages, expected) => {
    expect(deriveSystemPrompt(messages)).toBe(expected);
  });
});

describe("version and page parameters", () => {
  it.each([["1", 1], ["0", 0], ["42", 42], ["2147483647", 2147483647], ["2147483648", null], ["99999999999999999999", null]])(
    "parses %j",
    (raw, n) => expect(parseVersionNumber(raw)).toBe(n),
  );
  it.each(["", "abc", "1.0", "1.5", "-1", "+1", " 1", "1e3", "0x1"])("rejects %j", (raw) => {
    expect(() => parseVersionNumber(raw)).toThrow(RuleViolation);
  });
});

describe("typed chat request", () => {
  const validate: ChatRequestValidator = createChatRequestValidator({ brand: "service" });
  it("renders to the same JSON a client would send", () => {
    const req = create(CreatePresetVersionRequestSchema, {
      slug: "x",
      request: {
        case: "chatRequest",
        value: {
          messages: [{ role: "system", content: { kind: { case: "stringValue", value: "S" } } }],
          model: "m",
          temperature: 0,
          seed: 7n,
          stop: { kind: { case: "listValue", value: { values: [{ kind: { case: "stringValue", value: "x" } }] } } },
          provider: { only: ["OpenAI"], sort: { kind: { case: "stringValue", value: "price" } } },
          plugins: [{ id: "fusion", maxToolCalls: 3 }],
          metadata: { a: "b" },
        },
      },
    });
    const json = chatRequestJson(req);
    expect(json).toEqual({
      messages: [{ role: "system", content: "S" }],
      model: "m",
      metadata: { a: "b" },
      plugins: [{ id: "fusion", max_tool_calls: 3 }],
      provider: { only: ["OpenAI"], sort: "price" },
      seed: 7,
      stop: ["x"],
      temperature: 0,
    });
    expect(() => validate(json)).not.toThrow();
  });
  it("meets the same rules as the JSON form", () => {
    const req = create(CreatePresetVersionRequestSchema, {
      slug: "x",
      request: { case: "chatRequest", value: { messages: [{ role: "user", content: { kind: { case: "stringValue", value: "u" } } }], temperature: 2.5 } },
    });
    expect(() => validate(chatRequestJson(req))).toThrow(/temperature/);
  });
  it("requires one form", () => {
    expect(() => chatRequestJson(create(CreatePresetVersionRequestSchema, { slug: "x" }))).toThrow(RuleViolation);
  });
});

describe("creation retries", () => {
  const uniqueViolation = () =>
    Object.assign(new Error("Unique constraint failed"), { name: "PrismaClientKnownRequestError", code: "P2002" });

  it("classifies retryable errors", () => {
    expect(isRetryableWriteError(uniqueViolation())).toBe(true);
    expect(isRetryableWriteError(Object.assign(new Error("x"), { code: "P2034" }))).toBe(true);
    expect(isRetryableWriteError(new Error("SQLITE_BUSY: database is locked"))).toBe(true);
    expect(isRetryableWriteError(new Error("boom"))).toBe(false);
  });

  // The PostgreSQL path is one $queryRaw per attempt, so a stub client shows the retry policy alone.
  const stubDb = (queryRaw: () => Promise<unknown>) =>
    ({ $queryRaw: queryRaw, $transaction: () => Promise.reject(new Error("unexpected transaction")) }) as unknown as Db;
  const input = { workspaceId: "w", slug: "s", creatorUserId: "u", config: {}, systemPrompt: null };

  it("retries a bounded number of times, then reports a conflict (409)", async () => {
    let calls = 0;
    const db = stubDb(async () => { calls++; throw uniqueViolation(); });
    const repo = createPresetsRepository(db, { provider: "postgresql", maxAttempts: 4, backoffBaseMs: 1 });
    const err = await repo.createVersion(input).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PresetConflictError);
    expect(calls).toBe(4);
    const c = conflict();
    expect(c.code).toBe(Code.Aborted);
    expect(statusFor(c.code, "conflict")).toBe(409);
  });

  it("does not retry other errors", async () => {
    let calls = 0;
    const db = stubDb(async () => { calls++; throw new Error("boom"); });
    const repo = createPresetsRepository(db, { provider: "postgresql", maxAttempts: 4, backoffBaseMs: 1 });
    await expect(repo.createVersion(input)).rejects.toThrow("boom");
    expect(calls).toBe(1);
  });

  it("succeeds when a retry succeeds", async () => {
    let calls = 0;
    const at = new Date("2030-01-02T03:04:05.678Z");
    const row = {
      p_id: "p", p_workspaceId: "w", p_slug: "s", p_name: "s", p_description: null, p_status: "active",
      p_statusUpdatedAt: null, p_creatorUserId: "u", p_designatedVersionId: "v", p_latestVersion: 3,
      p_createdAt: at, p_updatedAt: at,
      v_id: "v", v_presetId: "p", v_version: 3, v_config: '{"model":"m"}', v_systemPrompt: null, v_creatorId: "u",
      v_createdAt: "2030-01-02T03:04:05.678+00:00", v_updatedAt: at,
    };
    const db = stubDb(async () => {
      calls++;
      if (calls < 3) throw uniqueViolation();
      return [row];
    });
    const repo = createPresetsRepository(db, { provider: "postgresql", backoffBaseMs: 1 });
    const { preset, version } = await repo.createVersion(input);
    expect(calls).toBe(3);
    expect(preset).toEqual({
      id: "p", workspaceId: "w", slug: "s", name: "s", description: null, status: "active", statusUpdatedAt: null,
      creatorUserId: "u", designatedVersionId: "v", latestVersion: 3, createdAt: at, updatedAt: at,
    });
    expect(version).toEqual({
      id: "v", presetId: "p", version: 3, config: { model: "m" }, systemPrompt: null, creatorId: "u", createdAt: at, updatedAt: at,
    });
  });
});
