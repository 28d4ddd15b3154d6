/**
 * Generation ids (src/core/chat/generation-id.ts): `gen-` and a version 7 UUID: valid UUID syntax with version 7 and
 * the RFC 9562 variant, the creation time in the first 48 bits (so ids of later milliseconds sort after earlier
 * ones, which keeps the Generation primary key's index append-mostly), and 74 random bits that differ between ids.
 */
import { describe, expect, it } from "vitest";
import { generationId, uuidv7 } from "../../../src/core/chat/generation-id.js";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("generation ids", () => {
  it("are gen- and a version 7 UUID", () => {
    const id = generationId();
    expect(id).toMatch(/^gen-/);
    expect(id.slice(4)).toMatch(V7);
  });

  it("carry the time in milliseconds in the first 48 bits", () => {
    const ms = Date.UTC(2026, 10, 26, 17, 30, 0, 123);
    const u = uuidv7(ms);
    expect(u).toMatch(V7);
    expect(Number.parseInt(u.slice(0, 8) + u.slice(9, 13), 16)).toBe(ms);
    expect(uuidv7(0).slice(0, 13)).toBe("00000000-0000");
    expect(uuidv7(2 ** 48 - 1).slice(0, 13)).toBe("ffffffff-ffff");
    const now = Date.now();
    const made = generationId().slice(4);
    expect(Math.abs(Number.parseInt(made.slice(0, 8) + made.slice(9, 13), 16) - now)).toBeLessThan(60_000);
  });

  it("sort by creation time across milliseconds", () => {
    const base = Date.UTC(2026, 0, 1);
    const ids = Array.from({ length: 1000 }, (_, i) => uuidv7(base + i * 7));
    expect([...ids].sort()).toEqual(ids);
  });

  it("differ in their random bits, within one millisecond too (more ids than one pool refill)", () => {
    const ms = Date.UTC(2026, 0, 1);
    const ids = Array.from({ length: 5000 }, () => uuidv7(ms));
    expect(new Set(ids).size).toBe(ids.length);
    for (const u of ids) expect(u).toMatch(V7);
    // Every hex digit of the random part takes many values (not a counter, not a constant).
    const tails = new Set(ids.map((u) => u.slice(24, 26)));
    expect(tails.size).toBeGreaterThan(200);
    const variants = new Set(ids.map((u) => u[19]));
    expect([...variants].sort()).toEqual(["8", "9", "a", "b"]);
  });
});
