/**
 * The BYOK flags, one by one and combined, as the description defines them (src/core/chat/credentials/select.ts).
 */
import { describe, expect, it } from "vitest";
import { selectCredentials, type CredentialRecord } from "../../../src/core/chat/credentials/select.js";

const KEY = "a".repeat(64);
const OTHER_KEY = "b".repeat(64);
let n = 0;
const cred = (over: Partial<CredentialRecord> = {}): CredentialRecord => ({
  id: `c${++n}`,
  provider: "anthropic",
  disabled: false,
  allowedModels: null,
  allowedApiKeyHashes: null,
  allowedUserIds: null,
  isRequired: false,
  isFallback: false,
  isByokOnly: false,
  sortOrder: 0,
  createdAt: new Date(2026, 0, 1, 0, 0, n),
  ...over,
});
const SHARED = [{ id: "op-1", provider: "anthropic" }, { id: "op-2", provider: "anthropic" }, { id: "op-oa", provider: "openai" }];
const req = (over: Partial<{ model: string; keyHash: string; userId: string; provider: string }> = {}) => ({
  provider: "anthropic",
  model: "anthropic/claude-sonnet-4",
  keyHash: KEY,
  userId: "u1",
  ...over,
});
const ids = (creds: CredentialRecord[], r = req()) => selectCredentials(creds, SHARED, r).map((s) => s.id);

describe("credential selection", () => {
  it("without credentials: the provider's shared credentials only", () => {
    expect(ids([])).toEqual(["op-1", "op-2"]);
    expect(ids([], req({ provider: "openai", model: "openai/gpt-4o" }))).toEqual(["op-oa"]);
  });

  it("own credentials first by sort_order (then age), then shared", () => {
    const late = cred({ id: "late", sortOrder: 5 });
    const early = cred({ id: "early", sortOrder: 1 });
    const tieOld = cred({ id: "tie-old", sortOrder: 3, createdAt: new Date(2025, 0, 1) });
    const tieNew = cred({ id: "tie-new", sortOrder: 3, createdAt: new Date(2025, 5, 1) });
    expect(ids([late, tieNew, early, tieOld])).toEqual(["early", "tie-old", "tie-new", "late", "op-1", "op-2"]);
  });

  it("another provider's credentials are not used", () => {
    expect(ids([cred({ id: "oa", provider: "openai" })])).toEqual(["op-1", "op-2"]);
  });

  it("disabled: skipped, and its flags do nothing", () => {
    expect(ids([cred({ id: "off", disabled: true, isRequired: true })])).toEqual(["op-1", "op-2"]);
  });

  it("allowed_models: exact slugs and <vendor>/* patterns", () => {
    const exact = cred({ id: "exact", allowedModels: ["anthropic/claude-sonnet-4"] });
    const wildcard = cred({ id: "wild", allowedModels: ["anthropic/*"] });
    const other = cred({ id: "other", allowedModels: ["anthropic/claude-opus-4"] });
    expect(ids([exact, wildcard, other])).toEqual(["exact", "wild", "op-1", "op-2"]);
    expect(ids([exact, wildcard, other], req({ model: "anthropic/claude-opus-4" }))).toEqual(["wild", "other", "op-1", "op-2"]);
  });

  it("allowed_api_key_hashes: only the listed keys see the credential", () => {
    const mine = cred({ id: "mine", allowedApiKeyHashes: [KEY] });
    expect(ids([mine])).toEqual(["mine", "op-1", "op-2"]);
    expect(ids([mine], req({ keyHash: OTHER_KEY }))).toEqual(["op-1", "op-2"]);
  });

  it("allowed_user_ids: only the listed users' keys see the credential", () => {
    const mine = cred({ id: "mine", allowedUserIds: ["u1"] });
    expect(ids([mine])).toEqual(["mine", "op-1", "op-2"]);
    expect(ids([mine], req({ userId: "u2" }))).toEqual(["op-1", "op-2"]);
  });

  it("is_fallback: after the non-fallback credentials and after shared", () => {
    const fb = cred({ id: "fb", isFallback: true, sortOrder: -10 });
    const main = cred({ id: "main", sortOrder: 10 });
    expect(ids([fb, main])).toEqual(["main", "op-1", "op-2", "fb"]);
  });

  it("is_required: no shared credentials for any model of the provider, even outside allowed_models", () => {
    const req1 = cred({ id: "req", isRequired: true, allowedModels: ["anthropic/claude-opus-4"] });
    expect(ids([req1], req({ model: "anthropic/claude-opus-4" }))).toEqual(["req"]);
    expect(ids([req1])).toEqual([]); // sonnet: outside its allowlist, and no shared capacity either
    expect(ids([req1], req({ provider: "openai", model: "openai/gpt-4o" }))).toEqual(["op-oa"]); // other providers untouched
  });

  it("is_required: after the caller's keys fail, fallback credentials remain but shared do not", () => {
    expect(ids([cred({ id: "req", isRequired: true }), cred({ id: "fb", isFallback: true })])).toEqual(["req", "fb"]);
  });

  it("is_byok_only: no shared credentials for the models it applies to; other models may use shared", () => {
    const only = cred({ id: "only", isByokOnly: true, allowedModels: ["anthropic/claude-sonnet-4"] });
    expect(ids([only])).toEqual(["only"]);
    expect(ids([only], req({ model: "anthropic/claude-opus-4" }))).toEqual(["op-1", "op-2"]);
    const all = cred({ id: "all", isByokOnly: true });
    expect(ids([all], req({ model: "anthropic/claude-opus-4" }))).toEqual(["all"]);
  });

  it("flags of a credential the caller is not granted have no effect on that caller", () => {
    const restricted = cred({ id: "r", isRequired: true, allowedApiKeyHashes: [KEY] });
    expect(ids([restricted], req({ keyHash: OTHER_KEY }))).toEqual(["op-1", "op-2"]);
    const byUser = cred({ id: "bu", isByokOnly: true, allowedUserIds: ["u1"] });
    expect(ids([byUser], req({ userId: "u2" }))).toEqual(["op-1", "op-2"]);
  });

  it("combined: disabled + required, fallback ordering, byok_only on one model, restrictions", () => {
    const creds = [
      cred({ id: "a-disabled-required", disabled: true, isRequired: true }),
      cred({ id: "b-main-2", sortOrder: 2 }),
      cred({ id: "c-main-1", sortOrder: 1, allowedApiKeyHashes: [KEY, OTHER_KEY] }),
      cred({ id: "d-fb", isFallback: true }),
      cred({ id: "e-byok-only-opus", isByokOnly: true, allowedModels: ["anthropic/claude-opus-4"], sortOrder: 0 }),
      cred({ id: "f-other-user", allowedUserIds: ["u9"] }),
    ];
    expect(ids(creds)).toEqual(["c-main-1", "b-main-2", "op-1", "op-2", "d-fb"]);
    expect(ids(creds, req({ model: "anthropic/claude-opus-4" }))).toEqual(["e-byok-only-opus", "c-main-1", "b-main-2", "d-fb"]);
  });
});
