/**
 * selectCredentials (one pass, src/core/chat/credentials/select.ts) against the filter / sort / map chain it replaced,
 * kept here as the reference: the same selections, and the same calls of `random` in the same order, over generated
 * credential sets (flags, restrictions, weights, providers, both orders).
 */
import { describe, expect, it } from "vitest";
import {
  modelMatches,
  selectCredentials,
  weightedOrder,
  type CredentialRecord,
  type DrawOptions,
  type SelectedCredential,
  type SelectionRequest,
  type SharedCredentialRecord,
} from "../../../src/core/chat/credentials/select.js";
import { mulberry32 as rng } from "../../helpers/prng.js";

function reference(byok: readonly CredentialRecord[], shared: readonly SharedCredentialRecord[], req: SelectionRequest, draw: DrawOptions = {}): SelectedCredential[] {
  const admitsModel = (c: CredentialRecord, model: string, aliases?: readonly string[]) =>
    c.allowedModels === null || c.allowedModels.some((p) => modelMatches(p, model) || (aliases !== undefined && aliases.some((a) => modelMatches(p, a))));
  const admitsCaller = (c: CredentialRecord) =>
    (c.allowedApiKeyHashes === null || c.allowedApiKeyHashes.includes(req.keyHash)) && (c.allowedUserIds === null || c.allowedUserIds.includes(req.userId));
  const byOrder = (a: CredentialRecord, b: CredentialRecord) =>
    a.sortOrder - b.sortOrder || a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const random = draw.random ?? Math.random;
  const ordered = draw.order !== "balanced";
  const tier = <T extends { weight?: number }>(stable: T[]) => (ordered ? stable : weightedOrder(stable, (c) => c.weight, random));
  const sharedOf = shared.filter((s) => s.provider === req.provider);
  const governing = byok.filter((c) => c.provider === req.provider && !c.disabled && admitsCaller(c));
  const usable = governing.filter((c) => admitsModel(c, req.model, req.aliases));
  const sharedRemoved = governing.some((c) => c.isRequired || (c.isByokOnly && admitsModel(c, req.model, req.aliases)));
  const own = (c: CredentialRecord): SelectedCredential => ({ id: c.id, source: "byok" });
  return [
    ...tier(usable.filter((c) => !c.isFallback).sort(byOrder)).map(own),
    ...(sharedRemoved ? [] : tier(sharedOf).map((s): SelectedCredential => ({ id: s.id, source: "shared" }))),
    ...tier(usable.filter((c) => c.isFallback).sort(byOrder)).map(own),
  ];
}


describe("selectCredentials against the reference chain", () => {
  it("selects the same credentials with the same draws", () => {
    const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed);
      const n = Math.floor(r() * 6);
      const byok: CredentialRecord[] = Array.from({ length: n }, (_, i) => ({
        id: pick(r, [`c${i}`, `c${5 - i}`, "c"]),
        provider: pick(r, ["anthropic", "anthropic", "openai"]),
        disabled: r() < 0.15,
        allowedModels: pick(r, [null, null, ["anthropic/*"], ["anthropic/claude-sonnet-4"], ["openai/gpt-4o"], ["anthropic/alias-model"]]),
        allowedApiKeyHashes: pick(r, [null, null, ["k1"], ["k2"]]),
        allowedUserIds: pick(r, [null, null, ["u1"], ["u2"]]),
        isRequired: r() < 0.15,
        isFallback: r() < 0.3,
        isByokOnly: r() < 0.15,
        sortOrder: Math.floor(r() * 3),
        createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, Math.floor(r() * 3))),
        ...(r() < 0.5 ? { weight: Math.floor(r() * 5) } : {}),
      }));
      const shared: SharedCredentialRecord[] = Array.from({ length: Math.floor(r() * 4) }, (_, i) => ({
        id: `s${i}`,
        provider: pick(r, ["anthropic", "openai"]),
        ...(r() < 0.5 ? { weight: 1 + Math.floor(r() * 4) } : {}),
      }));
      const req: SelectionRequest = {
        provider: pick(r, ["anthropic", "openai"]),
        model: pick(r, ["anthropic/claude-sonnet-4", "openai/gpt-4o"]),
        ...(r() < 0.5 ? { aliases: ["anthropic/alias-model"] } : {}),
        keyHash: pick(r, ["k1", "k2"]),
        userId: pick(r, ["u1", "u2"]),
      };
      const order = pick(r, ["balanced", "ordered", undefined] as const);
      const drawsA: number[] = [];
      const drawsB: number[] = [];
      const ra = rng(seed * 7919);
      const rb = rng(seed * 7919);
      const a = selectCredentials(byok, shared, req, { ...(order ? { order } : {}), random: () => (drawsA.push(0), ra()) });
      const b = reference(byok, shared, req, { ...(order ? { order } : {}), random: () => (drawsB.push(0), rb()) });
      expect(a, `seed ${seed}`).toEqual(b);
      expect(drawsA.length, `seed ${seed}`).toBe(drawsB.length);
    }
  });
});
