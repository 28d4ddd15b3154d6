/**
 * Canary: random provider keys go through many request shapes (valid, invalid, 401, 403, over-size,
 * malformed, key in the wrong field, a forced database failure, HTTP and gRPC). Afterwards no
 * response body, log line or raw database content holds any of them in any common encoding.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { harnessKeyring, storedKey } from "./byok-helpers.js";

/** Every form of a key worth searching for. */
function encodings(key: string): string[] {
  const b = Buffer.from(key, "utf8");
  return [
    key,
    b.toString("base64"),
    b.toString("base64url"),
    b.toString("hex"),
    b.toString("hex").toUpperCase(),
    encodeURIComponent(key),
    encodeURIComponent(key).replace(/%20/g, "+"),
    JSON.stringify(key).slice(1, -1),
    JSON.stringify(JSON.stringify(key)).slice(1, -1),
  ];
}

/**
 * Canaries with characters that change under URL, JSON and base64 encoding. Visible ASCII only: a key a header
 * cannot carry is refused at creation (400 on `key`), so it never gets far enough to leak.
 */
function canary(i: number): string {
  return `sk-proj-CANARY${i}-${randomBytes(20).toString("hex")}"\\/+=&?%~${randomBytes(4).toString("hex")}`;
}

describe.each(["sqlite", "postgresql"] as const)("BYOK canary keys never leak (%s)", (provider) => {
  let h: Harness;
  const keys: string[] = [];
  const bodies: string[] = [];
  const grpcDumps: string[] = [];
  let grpcByok: any;

  const call = async (method: string, path: string, opts: Parameters<typeof api>[3]) => {
    const res = await api(h, method, path, opts);
    bodies.push(res.text, JSON.stringify([...res.headers.entries()]));
    return res;
  };

  beforeAll(async () => {
    h = await startHarness({ provider });
    grpcByok = grpcClient("portico/byok/v1/byok_service.proto", "portico.byok.v1.ByokService", h.coreUrl);
  });
  afterAll(async () => {
    grpcByok?.close();
    await h?.close();
  });

  it("drives the request shapes", async () => {
    const t = h.tenant;
    const next = () => {
      const k = canary(keys.length);
      keys.push(k);
      return k;
    };
    const m = t.managementKey;
    const created: string[] = [];

    // Valid creates and a rotation.
    for (const p of ["openai", "anthropic", "groq"]) {
      const res = await call("POST", "/byok", { key: m, body: { key: next(), provider: p, name: "canary" } });
      expect(res.status).toBe(200);
      created.push(res.json.data.id);
    }
    expect((await call("PATCH", `/byok/${created[0]}`, { key: m, body: { key: next() } })).status).toBe(200);
    // Invalid ones.
    const invalid: Array<Record<string, unknown>> = [
      { key: next(), provider: "nope" },
      { key: next(), provider: "openai", is_fallback: true, is_byok_only: true },
      { key: next(), provider: "openai", workspace_id: randomUUID() },
      { key: next(), provider: "openai", allowed_api_key_hashes: [randomBytes(32).toString("hex")] },
      { key: next(), provider: "openai", allowed_api_key_hashes: ["bad"] },
      { key: next(), provider: "openai", name: "n".repeat(300) },
      { key: next(), provider: "openai", disabled: "yes" },
      { key: next() + "x".repeat(33 * 1024), provider: "openai" },
    ];
    for (const body of invalid) expect((await call("POST", "/byok", { key: m, body })).status).toBe(400);
    // The key pasted into the wrong fields.
    let k = next();
    expect((await call("POST", "/byok", { key: m, body: { key: "sk-ok-1234", provider: k } })).status).toBe(400);
    k = next();
    expect((await call("POST", "/byok", { key: m, body: { key: "sk-ok-1234", provider: "openai", workspace_id: k } })).status).toBe(400);
    k = next();
    expect((await call("POST", "/byok", { key: m, body: { key: "sk-ok-1234", provider: "openai", allowed_api_key_hashes: [k] } })).status).toBe(400);
    k = next();
    expect((await call("GET", `/byok?provider=${encodeURIComponent(k)}`, { key: m })).status).toBe(400);
    k = next();
    expect((await call("GET", `/byok/${encodeURIComponent(k)}`, { key: m })).status).toBe(404);
    // Invalid update with a new key.
    expect((await call("PATCH", `/byok/${created[1]}`, { key: m, body: { key: next(), is_fallback: true, is_required: true } })).status).toBe(400);
    expect((await call("PATCH", `/byok/${randomUUID()}`, { key: m, body: { key: next() } })).status).toBe(404);
    // 401 and 403.
    expect((await call("POST", "/byok", { body: { key: next(), provider: "openai" } })).status).toBe(401);
    expect((await call("POST", "/byok", { key: `pk-v1-${randomBytes(32).toString("hex")}`, body: { key: next(), provider: "openai" } })).status).toBe(401);
    expect((await call("POST", "/byok", { key: t.apiKey, body: { key: next(), provider: "openai" } })).status).toBe(403);
    expect((await call("PATCH", `/byok/${created[2]}`, { key: t.apiKey, body: { key: next() } })).status).toBe(403);
    // A key used as the bearer token.
    expect((await call("GET", "/byok", { key: next() })).status).toBe(401);
    // Over-size body, malformed JSON, wrong content type.
    const big = next();
    expect((await call("POST", "/byok", { key: m, rawBody: JSON.stringify({ key: big + "y".repeat(1_100_000), provider: "openai" }), headers: { "content-type": "application/json" } })).status).toBe(413);
    expect((await call("POST", "/byok", { key: m, rawBody: `{"key": "${next()}", "provider": `, headers: { "content-type": "application/json" } })).status).toBe(400);
    expect((await call("POST", "/byok", { key: m, rawBody: `key=${next()}`, headers: { "content-type": "application/x-www-form-urlencoded" } })).status).toBe(415);
    // gRPC: valid, invalid, unauthenticated.
    for (const [req, md] of [
      [{ key: next(), provider: "mistral" }, bearer(m)],
      [{ key: next(), provider: "bogus" }, bearer(m)],
      [{ key: next(), provider: "openai" }, bearer(t.apiKey)],
      [{ key: next(), provider: "openai" }, undefined],
    ] as const) {
      const res = await unary(grpcByok, "CreateByokCredential", req, md);
      grpcDumps.push(JSON.stringify(res.response ?? null), String(res.error?.message), String(res.error?.details), JSON.stringify(res.error?.metadata?.getMap() ?? {}));
    }
    // A forced database failure: the credential table disappears mid-run.
    await h.database.db.$executeRawUnsafe(`ALTER TABLE "ByokCredential" RENAME TO "ByokCredential_gone"`);
    try {
      const res = await call("POST", "/byok", { key: m, body: { key: next(), provider: "openai" } });
      expect(res.status).toBe(500);
      expect(res.json).toEqual({ error: { code: 500, message: "Internal Server Error" } });
      expect((await call("PATCH", `/byok/${created[1]}`, { key: m, body: { key: next() } })).status).toBe(500);
      const g = await unary(grpcByok, "CreateByokCredential", { key: next(), provider: "openai" }, bearer(m));
      grpcDumps.push(String(g.error?.message), String(g.error?.details));
      expect(g.error?.details).toBe("Internal Server Error");
    } finally {
      await h.database.db.$executeRawUnsafe(`ALTER TABLE "ByokCredential_gone" RENAME TO "ByokCredential"`);
    }
    // Reads after everything.
    for (const id of created) expect((await call("GET", `/byok/${id}`, { key: m })).status).toBe(200);
    expect((await call("GET", "/byok?limit=100", { key: m })).status).toBe(200);
    expect((await call("DELETE", `/byok/${created[2]}`, { key: m })).status).toBe(200);
    const metrics = await fetch(`${h.baseUrl}/metrics`);
    bodies.push(await metrics.text());
    const openapi = await call("GET", "/openapi.json", {});
    expect(openapi.status).toBe(200);
    // The stored credentials still decrypt to their keys (so the search below looks at real material).
    const keyring = harnessKeyring(h);
    expect(await storedKey(h, keyring, created[1]!)).toBe(keys[1]);
    expect(h.logs.some((l) => l.includes('"level":50'))).toBe(true); // the forced failure was logged
  });

  it("finds none of the keys in any encoding in responses, logs or the database", async () => {
    expect(keys.length).toBeGreaterThan(30);
    const haystacks: Array<[string, Buffer]> = [
      ["responses", Buffer.from(bodies.join("\n"))],
      ["grpc", Buffer.from(grpcDumps.join("\n"))],
      ["logs", Buffer.from(h.logs.join("\n"))],
    ];
    if (provider === "sqlite") {
      const dbFile = h.database.url.slice("file:".length);
      for (const f of readdirSync(dirname(dbFile))) {
        if (f.startsWith("portico.db")) haystacks.push([f, readFileSync(join(dirname(dbFile), f))]);
      }
      expect(haystacks.some(([n]) => n === "portico.db-wal")).toBe(true);
    } else {
      const client = new pg.Client({ connectionString: h.database.url });
      await client.connect();
      try {
        const tables = await client.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`);
        for (const { tablename } of tables.rows) {
          const rows = await client.query(`SELECT row_to_json(t)::text AS j FROM "${tablename}" t`);
          haystacks.push([tablename, Buffer.from(rows.rows.map((r) => r.j).join("\n"))]);
        }
      } finally {
        await client.end();
      }
      expect(haystacks.some(([n]) => n === "ByokCredential")).toBe(true);
    }
    // Positive control: the search does find material that is there (a label, stored and returned).
    const label = (await h.database.db.byokCredential.findFirstOrThrow({ where: { deletedAt: null } })).label;
    expect(label).toMatch(/^sk-proj-\.\.\..{4}$/);
    const dbHay = haystacks.filter(([n]) => n !== "responses" && n !== "grpc" && n !== "logs");
    expect(dbHay.some(([, hay]) => hay.includes(Buffer.from(label)))).toBe(true);
    expect(haystacks[0]![1].includes(Buffer.from(JSON.stringify(label).slice(1, -1)))).toBe(true);
    const hits: string[] = [];
    for (const key of keys) {
      for (const form of encodings(key)) {
        const needle = Buffer.from(form, "utf8");
        for (const [name, hay] of haystacks) {
          if (hay.includes(needle)) hits.push(`${name}: ${form.slice(0, 24)}…`);
        }
        // The distinctive middle part alone (survives partial encodings).
        const core = key.slice(8, 48);
        for (const [name, hay] of haystacks) if (hay.includes(Buffer.from(core))) hits.push(`${name}: core of ${core.slice(0, 16)}…`);
      }
    }
    expect(hits).toEqual([]);
  });
});
