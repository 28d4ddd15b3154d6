/**
 * Stage "preset" without a server (src/core/chat/pipeline/preset.ts), on a real SQLite database through the presets
 * repository: what it passes on (the merged request, the designated or the named version, what it records), and what
 * it refuses before the rest of the chain runs (a bad reference, an unknown preset or version, a preset switched off,
 * another workspace's preset).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectError, Code } from "@connectrpc/connect";
import { compose, newCall, type ChatCall, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createPresetStage } from "../../../src/core/chat/pipeline/preset.js";
import { createPresetsRepository, type PresetsRepository } from "../../../src/core/presets/presets-repository.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { freshSqlite } from "../../helpers/db.js";

const callerIn = (workspaceId: string): Caller => ({
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId, userId: "u1", isManagement: false, internsProgramme: false,
});

describe("preset stage", () => {
  let database: DatabaseHandle;
  let presets: PresetsRepository;
  beforeAll(async () => {
    database = await freshSqlite();
    presets = createPresetsRepository(database.db, { provider: "sqlite" });
    // "brief": version 1 designated, version 2 only by number.
    const v1 = await presets.createVersion({
      workspaceId: "w1", slug: "brief", creatorUserId: "u1", systemPrompt: "Be brief.",
      config: { model: "openai/gpt-4o-mini", temperature: 0.2, max_tokens: 50, user: "preset-user", metadata: { team: "docs" } },
    });
    await presets.createVersion({ workspaceId: "w1", slug: "brief", creatorUserId: "u1", systemPrompt: "Be very brief.", config: { model: "anthropic/claude-3-5-haiku", temperature: 0.9 } });
    await database.db.preset.update({ where: { id: v1.preset.id }, data: { designatedVersionId: v1.version.id } });
    const off = await presets.createVersion({ workspaceId: "w1", slug: "switched-off", creatorUserId: "u1", systemPrompt: null, config: { model: "openai/gpt-4o" } });
    await database.db.preset.update({ where: { id: off.preset.id }, data: { status: "disabled" } });
    const gone = await presets.createVersion({ workspaceId: "w1", slug: "gone", creatorUserId: "u1", systemPrompt: null, config: { model: "openai/gpt-4o" } });
    await database.db.preset.update({ where: { id: gone.preset.id }, data: { status: "archived" } });
    const undesignated = await presets.createVersion({ workspaceId: "w1", slug: "undesignated", creatorUserId: "u1", systemPrompt: null, config: { model: "openai/gpt-4o" } });
    await database.db.preset.update({ where: { id: undesignated.preset.id }, data: { designatedVersionId: null } });
    await presets.createVersion({ workspaceId: "w2", slug: "elsewhere", creatorUserId: "u1", systemPrompt: null, config: { model: "openai/gpt-4o" } });
  });
  afterAll(async () => database?.close());

  /** Runs the stage on `body` for a caller of `workspaceId`; `seen` is the call the rest of the chain got (undefined: not run). */
  async function run(body: Record<string, unknown>, workspaceId = "w1") {
    let seen: { request: Record<string, unknown>; call: ChatCall } | undefined;
    const rest: ChatStage = {
      name: "rest",
      async run(call) {
        seen = { request: structuredClone(call.request) as Record<string, unknown>, call };
        return { kind: "completion", completion: {} as never };
      },
    };
    const call = newCall(callerIn(workspaceId), new AbortController().signal, false, body as unknown as CanonicalRequest);
    const error = await compose([createPresetStage({ presets }), rest])(call).then(() => undefined, (e: unknown) => e);
    return { seen, error: error as ConnectError | undefined, call };
  }
  const refusal = (error: ConnectError | undefined) => {
    expect(error).toBeInstanceOf(ConnectError);
    return { code: error!.code, message: error!.rawMessage, detail: errorDetailOf(error!) };
  };

  it("passes a request that names no preset on unchanged, recording no preset", async () => {
    const body = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] };
    const { seen, error, call } = await run(body);
    expect(error).toBeUndefined();
    expect(seen!.request).toEqual(body);
    expect(call.track.presetSlug).toBeNull();
    expect(call.track.presetVersion).toBeNull();
  });

  it("`model: @preset/<slug>`: the designated version's config fills what the request leaves unset, its system prompt goes first", async () => {
    const { seen, error, call } = await run({ model: "@preset/brief", temperature: 0.7, messages: [{ role: "user", content: "hi" }] });
    expect(error).toBeUndefined();
    expect(seen!.request).toEqual({
      model: "openai/gpt-4o-mini",
      temperature: 0.7, // the request's own value wins
      max_tokens: 50,
      user: "preset-user",
      metadata: { team: "docs" },
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hi" }],
    });
    expect(call.track.presetSlug).toBe("brief");
    expect(call.track.presetVersion).toBe(1);
    // What the preset set of the request's context is recorded as the merged request has it.
    expect(call.track.context.user).toBe("preset-user");
    expect(JSON.parse(call.track.context.metadata!)).toEqual({ team: "docs" });
  });

  it("a named version, through `model` or the `preset` field; the `preset` field is not passed on and the request's model stays", async () => {
    const byModel = await run({ model: "@preset/brief@2", messages: [{ role: "system", content: "Mine." }, { role: "user", content: "hi" }] });
    expect(byModel.error).toBeUndefined();
    expect(byModel.seen!.request).toEqual({ model: "anthropic/claude-3-5-haiku", temperature: 0.9, messages: [{ role: "system", content: "Mine." }, { role: "user", content: "hi" }] });
    expect(byModel.call.track.presetVersion).toBe(2);

    const byField = await run({ model: "openai/gpt-4o", preset: "brief@2", messages: [{ role: "user", content: "hi" }] });
    expect(byField.error).toBeUndefined();
    expect(byField.seen!.request).toEqual({ model: "openai/gpt-4o", temperature: 0.9, messages: [{ role: "system", content: "Be very brief." }, { role: "user", content: "hi" }] });
    expect(byField.call.track).toMatchObject({ presetSlug: "brief", presetVersion: 2 });
  });

  it("refuses a bad reference with 400 naming its field, before the rest of the chain", async () => {
    const differ = await run({ model: "@preset/brief", preset: "other", messages: [] });
    expect(differ.seen).toBeUndefined();
    expect(refusal(differ.error)).toMatchObject({ code: Code.InvalidArgument, detail: { reason: "bad_request", field: "preset" } });
    const version = await run({ model: "@preset/brief@0", messages: [] });
    expect(version.seen).toBeUndefined();
    expect(refusal(version.error)).toMatchObject({ code: Code.InvalidArgument, message: "model: the preset version must be a positive integer", detail: { field: "model" } });
  });

  it("refuses an unknown preset, another workspace's, an unknown version and a preset without a designated version with not_found", async () => {
    for (const [body, workspaceId, message] of [
      [{ model: "@preset/nope" }, "w1", 'No preset "nope" in this workspace'],
      [{ model: "@preset/elsewhere" }, "w1", 'No preset "elsewhere" in this workspace'],
      [{ model: "@preset/brief@9" }, "w1", 'Preset "brief" has no version 9'],
      [{ model: "@preset/undesignated" }, "w1", 'Preset "undesignated" has no designated version'],
    ] as const) {
      const r = await run({ ...body, messages: [] }, workspaceId);
      expect(r.seen, message).toBeUndefined();
      expect(refusal(r.error)).toMatchObject({ code: Code.NotFound, message, detail: { reason: "not_found" } });
      expect(r.call.track.presetSlug).toBeNull();
    }
    // The owner's workspace sees it.
    expect((await run({ model: "@preset/elsewhere", messages: [] }, "w2")).seen!.request.model).toBe("openai/gpt-4o");
  });

  it("refuses a disabled or archived preset, naming the preset and the field that named it", async () => {
    const disabled = await run({ model: "@preset/switched-off", messages: [] });
    expect(disabled.seen).toBeUndefined();
    const d = refusal(disabled.error);
    expect(disabled.error!.code).toBe(Code.FailedPrecondition); // 409 conflict
    expect(d.detail).toMatchObject({ reason: "conflict", field: "model" });
    expect(d.message).toMatch(/^Preset "switched-off" is disabled and serves no requests: set its status to active/);
    const archived = await run({ model: "openai/gpt-4o", preset: "gone", messages: [] });
    expect(archived.seen).toBeUndefined();
    const a = refusal(archived.error);
    expect(a.detail).toMatchObject({ reason: "conflict", field: "preset" });
    expect(a.message).toMatch(/^Preset "gone" is archived/);
  });
});
