import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PresetSchema, PresetVersionSchema } from "../../../src/gen/portico/presets/v1/preset_pb.js";
import { presentPreset, presentPresetWithVersion } from "../../../src/gateway/presenters/presets.js";

describe("preset presenter", () => {
  const t = new Date("2025-01-02T03:04:05.678Z");
  it("renders every key, nulls for absent optionals, ISO timestamps", () => {
    const p = create(PresetSchema, { id: "p", slug: "s", name: "s", status: "active", createdAt: timestampFromDate(t), updatedAt: timestampFromDate(t) });
    expect(presentPreset(p)).toEqual({
      id: "p", slug: "s", name: "s", description: null, status: "active", status_updated_at: null,
      created_at: "2025-01-02T03:04:05.678Z", updated_at: "2025-01-02T03:04:05.678Z",
      creator_user_id: null, workspace_id: null, designated_version_id: null,
    });
    expect(presentPresetWithVersion(p, undefined).designated_version).toBeNull();
  });
  it("renders a version with config as stored", () => {
    const p = create(PresetSchema, { id: "p", slug: "s", name: "s", status: "active", designatedVersionId: "v", createdAt: timestampFromDate(t), updatedAt: timestampFromDate(t) });
    const v = create(PresetVersionSchema, { id: "v", presetId: "p", version: 3, config: { stop: null, temperature: 0.7 }, creatorId: "u", createdAt: timestampFromDate(t), updatedAt: timestampFromDate(t) });
    const out = presentPresetWithVersion(p, v);
    expect(out.designated_version).toEqual({
      id: "v", preset_id: "p", version: 3, config: { stop: null, temperature: 0.7 }, system_prompt: null,
      creator_id: "u", created_at: "2025-01-02T03:04:05.678Z", updated_at: "2025-01-02T03:04:05.678Z",
    });
    expect(out.designated_version_id).toBe("v");
  });
});
