import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  isUniqueViolation,
  openDatabase,
  redactDatabaseUrl,
  resolveDatabaseUrl,
  uniqueViolationFields,
  type DatabaseHandle,
} from "../../../src/db/client.js";
import { DbNull, JsonNull, Prisma, type InputJsonValue } from "../../../src/db/prisma.js";
import { dbProviders, freshSqlite, useDatabase } from "../../helpers/db.js";
import { watchBusyBegins } from "../../helpers/sqlite-busy.js";
import { waitFor } from "../../helpers/wait.js";

describe.each(dbProviders)("database client (%s)", (provider, fresh) => {
  const handle = useDatabase(fresh);
  let h: DatabaseHandle;
  beforeEach(() => {
    h = handle(); // throws (fails the test) when the database could not be created
  });

  async function presetVersion(config: InputJsonValue) {
    const preset = await h.db.preset.create({
      data: { workspaceId: "ws", slug: `p-${Math.random().toString(36).slice(2)}`, name: "P" },
    });
    return h.db.presetVersion.create({ data: { presetId: preset.id, version: 1, config, creatorId: "u" } });
  }

  it("reports its provider", () => {
    expect(h.provider).toBe(provider);
  });

  it.each<[string, InputJsonValue]>([
    ["object", { model: "gpt-x", temperature: 0.25, stop: ["\n"], nested: { a: [1, { b: null }] } }],
    ["array", [1, "two", { three: 3 }, [true, false]]],
    ["string", "just a string"],
    ["number", 42.5],
    ["boolean", true],
    ["unicode", { text: "héllo ✓ 日本語 🚀", "ключ": "значение" }],
    ["empty object", {}],
  ])("round-trips Json (%s)", async (_name, value) => {
    const created = await presetVersion(value);
    const read = await h.db.presetVersion.findUniqueOrThrow({ where: { id: created.id } });
    expect(read.config).toEqual(value);
  });

  it("executeRaw runs a parameterized statement past the Prisma client and counts the rows it changed", async () => {
    const ph = (n: number) => (provider === "postgresql" ? `$${n}` : "?");
    const label = `raw-${Math.random().toString(36).slice(2)}`;
    const sql = `INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${ph(1)}, ${ph(2)}, ${ph(3)}, ${ph(4)}${provider === "postgresql" ? "::timestamp(3)" : ""}), (${ph(5)}, ${ph(6)}, ${ph(7)}, ${ph(8)}${provider === "postgresql" ? "::timestamp(3)" : ""})`;
    const at = new Date("2026-01-02T03:04:05.678Z");
    const stamp = provider === "postgresql" ? at.toISOString() : at.toISOString().replace(/Z$/, "+00:00");
    const changed = await h.executeRaw(sql, [`${label}-1`, `${label}-1@x.invalid`, label, stamp, `${label}-2`, `${label}-2@x.invalid`, `${label}-b`, stamp]);
    expect(changed).toBe(2);
    const rows = await h.db.user.findMany({ where: { id: { in: [`${label}-1`, `${label}-2`] } }, orderBy: { id: "asc" } });
    expect(rows.map((r) => [r.email, r.name, r.createdAt.toISOString()])).toEqual([
      [`${label}-1@x.invalid`, label, at.toISOString()],
      [`${label}-2@x.invalid`, `${label}-b`, at.toISOString()],
    ]);
  });

  it("queryRaw reads rows past the Prisma client, as arrays, the same named statement on several connections at once", async () => {
    const label = `read-${Math.random().toString(36).slice(2)}`;
    await h.db.user.create({ data: { id: `${label}-1`, email: `${label}@x.invalid`, name: label } });
    const sql =
      provider === "sqlite"
        ? `SELECT "id", CAST(? AS TEXT), CAST(9223372036854775807 AS TEXT), COUNT(*) OVER () FROM "User" WHERE "name" = ?`
        : `SELECT "id", CAST($1 AS TEXT), CAST(9223372036854775807 AS TEXT), CAST(COUNT(*) OVER () AS INT) FROM "User" WHERE "name" = $2`;
    const answers = await Promise.all([1, 2, 3].map(() => h.queryRaw("test_user_read", sql, ["x", label])));
    // An INTEGER arrives as the adapter maps it on SQLite (a decimal string), as a number from pg's int4.
    for (const rows of answers) expect(rows.map((r) => [r[0], r[1], r[2], Number(r[3])])).toEqual([[`${label}-1`, "x", "9223372036854775807", 1]]);
    expect(await h.queryRaw("test_user_read", sql, ["x", `${label}-none`])).toEqual([]);
  });

  it.skipIf(provider !== "sqlite")("queryRaw (SQLite) maps values and parameters as the driver adapter does, and waits for an open transaction", async () => {
    const db = h.db;
    await db.$executeRawUnsafe(
      `CREATE TABLE IF NOT EXISTS read_probe (k TEXT PRIMARY KEY, i INTEGER, big BIGINT, at DATETIME, stamp TIMESTAMP, r REAL, bytes BLOB, flag BOOLEAN, loose)`,
    );
    await db.$executeRawUnsafe(`DELETE FROM read_probe`);
    await db.$executeRawUnsafe(
      `INSERT INTO read_probe VALUES ('a', 7, 9007199254740993, 1767323045678, '2026-01-02T03:04:05.678+00:00', 1.5, X'0102ff', 1, 12), ` +
        `('b', 2.5, -3, '2026-01-02 03:04:05', 1767323045678, -0.25, NULL, 0, 'text'), ('c', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2.75)`,
    );
    const sql = `SELECT k, i, big, at, stamp, r, bytes, flag, loose, ? AS p1, ? AS p2, ? AS p3, ? AS p4, ? AS p5, i + 1 AS expr FROM read_probe ORDER BY k`;
    const args = [true, false, new Date("2026-01-02T03:04:05.678Z"), "s", null];
    // The reference: Prisma's better-sqlite3 adapter itself, on a connection of its own to the same file.
    const { PrismaBetterSQLite3 } = await import("@prisma/adapter-better-sqlite3");
    const adapter = await new PrismaBetterSQLite3({ url: h.url }).connect();
    try {
      const expected = (await adapter.queryRaw({ sql, args, argTypes: args.map(() => ({ scalarType: "unknown", arity: "scalar" })) } as never)).rows;
      expect(await h.queryRaw("read_probe", sql, args)).toEqual(expected);
      // Again (column conversions from the statement's cache).
      expect(await h.queryRaw("read_probe", sql, args)).toEqual(expected);
      // What the adapter makes of them: 64-bit integers as text, a numeric DATETIME as ISO text, bytes as numbers, a
      // column without a declared type typed from its first non-null value (a BigInt: 2.75 below truncated to 2).
      expect(expected[0]).toEqual(["a", "7", "9007199254740993", "2026-01-02T03:04:05.678Z", "2026-01-02T03:04:05.678+00:00", 1.5, [1, 2, 255], "1", "12", 1, 0, "2026-01-02T03:04:05.678+00:00", "s", null, "8"]);
      expect(expected[2]![8]).toBe(2);
    } finally {
      await adapter.dispose();
    }
    // A read made while a transaction is open runs after it: it never sees (or joins) the transaction's writes.
    let read: Promise<unknown[][]> | undefined;
    await db
      .$transaction(async (tx) => {
        await tx.$executeRawUnsafe(`INSERT INTO read_probe (k) VALUES ('in-tx')`);
        read = h.queryRaw("read_probe_k", `SELECT k FROM read_probe WHERE k = ?`, ["in-tx"]);
        throw new Error("roll back");
      })
      .catch(() => undefined);
    expect(await read!).toEqual([]);
  });

  it("writeSqlite (SQLite) and executePrepared (PostgreSQL) run prepared statements past the adapter", async () => {
    const label = `hot-${Math.random().toString(36).slice(2)}`;
    const at = new Date("2026-01-02T03:04:05.678Z");
    if (provider === "sqlite") {
      expect(h.executePrepared).toBeUndefined();
      const sql = `INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (?, ?, ?, ?), (?, ?, ?, ?)`;
      const stamp = at.toISOString().replace(/Z$/, "+00:00");
      const changed = await h.writeSqlite!((c) => {
        const st = c.prepare(sql);
        return st.run([`${label}-1`, `${label}-1@x.invalid`, label, stamp, `${label}-2`, `${label}-2@x.invalid`, label, stamp]).changes;
      });
      expect(changed).toBe(2);
      // A throw rolls back every statement of the call, and the error is the driver's.
      const failed = await h
        .writeSqlite!((c) => {
          c.prepare(`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (?, ?, ?, ?)`).run([`${label}-3`, `${label}-3@x.invalid`, label, stamp]);
          c.prepare(`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (?, ?, ?, ?)`).run([`${label}-4`, null, label, stamp]);
        })
        .catch((e: { code?: string }) => e.code);
      expect(failed).toBe("SQLITE_CONSTRAINT_NOTNULL");
    } else {
      expect(h.writeSqlite).toBeUndefined();
      const sql = `INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES ($1, $2, $3, $4::timestamp(3))`;
      // The same name twice (and on more than one pooled connection at once): prepared once per connection.
      const changed = await Promise.all(
        [1, 2, 3].map((i) => h.executePrepared!("test_user_insert", sql, [`${label}-${i}`, `${label}-${i}@x.invalid`, label, at.toISOString()])),
      );
      expect(changed).toEqual([1, 1, 1]);
      expect(await h.executePrepared!("test_user_insert", sql, [`${label}-1`, `${label}-dup@x.invalid`, label, at.toISOString()]).catch((e: { code?: string }) => e.code)).toBe("23505");
    }
    const rows = await h.db.user.findMany({ where: { name: label }, orderBy: { id: "asc" } });
    expect(rows.map((r) => [r.id, r.createdAt.toISOString()])).toEqual(
      (provider === "sqlite" ? [1, 2] : [1, 2, 3]).map((i) => [`${label}-${i}`, at.toISOString()]),
    );
  });

  it("distinguishes DbNull from JsonNull and filters with equals", async () => {
    const base = { organizationId: "o", workspaceId: "w", provider: "openai", label: "k" };
    const dbNull = await h.db.byokCredential.create({ data: { ...base, allowedModels: DbNull } });
    const jsonNull = await h.db.byokCredential.create({ data: { ...base, allowedModels: JsonNull } });
    const list = await h.db.byokCredential.create({ data: { ...base, allowedModels: ["a/b", "c/d"] } });

    expect((await h.db.byokCredential.findUniqueOrThrow({ where: { id: dbNull.id } })).allowedModels).toBeNull();
    expect((await h.db.byokCredential.findUniqueOrThrow({ where: { id: jsonNull.id } })).allowedModels).toBeNull();
    const onlyDbNull = await h.db.byokCredential.findMany({ where: { allowedModels: { equals: Prisma.DbNull } } });
    const onlyJsonNull = await h.db.byokCredential.findMany({ where: { allowedModels: { equals: Prisma.JsonNull } } });
    expect(onlyDbNull.map((r) => r.id)).toContain(dbNull.id);
    expect(onlyDbNull.map((r) => r.id)).not.toContain(jsonNull.id);
    expect(onlyJsonNull.map((r) => r.id)).toEqual([jsonNull.id]);
    const byValue = await h.db.byokCredential.findMany({ where: { allowedModels: { equals: ["a/b", "c/d"] } } });
    expect(byValue.map((r) => r.id)).toEqual([list.id]);
  });

  it("round-trips Bytes and DateTime", async () => {
    const ciphertext = new Uint8Array([0, 1, 2, 254, 255]);
    const deletedAt = new Date("2026-01-02T03:04:05.678Z");
    const c = await h.db.byokCredential.create({
      data: { organizationId: "o", workspaceId: "w", provider: "p", label: "l", ciphertext, deletedAt },
    });
    const read = await h.db.byokCredential.findUniqueOrThrow({ where: { id: c.id } });
    expect(Array.from(read.ciphertext ?? [])).toEqual([0, 1, 2, 254, 255]);
    expect(read.deletedAt?.toISOString()).toBe(deletedAt.toISOString());
  });

  it("detects unique violations (P2002) with their fields", async () => {
    await h.db.user.create({ data: { email: "dup@example.com", name: "A" } });
    const err = await h.db.user.create({ data: { email: "dup@example.com", name: "B" } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Prisma.PrismaClientKnownRequestError);
    expect((err as Prisma.PrismaClientKnownRequestError).code).toBe("P2002");
    expect(isUniqueViolation(err)).toBe(true);
    expect(uniqueViolationFields(err)).toEqual(["email"]);

    const org = await h.db.organization.create({ data: { name: "Org" } });
    await h.db.workspace.create({ data: { organizationId: org.id, name: "W", slug: "w" } });
    const err2 = await h.db.workspace
      .create({ data: { organizationId: org.id, name: "W2", slug: "w" } })
      .catch((e: unknown) => e);
    expect(isUniqueViolation(err2)).toBe(true);
    expect(uniqueViolationFields(err2)).toEqual(["organizationId", "slug"]);
  });

  it("detects unique violations from raw queries", async () => {
    await h.db.keyringKey.create({ data: { id: "k1", checkValue: "x" } });
    const err = await h.db
      .$executeRaw`INSERT INTO "KeyringKey" ("id", "checkValue", "createdAt") VALUES ('k1', 'y', CURRENT_TIMESTAMP)`
      .catch((e: unknown) => e);
    expect(isUniqueViolation(err)).toBe(true);
  });

  it("does not mistake other errors for unique violations", async () => {
    const fk = await h.db.membership
      .create({ data: { organizationId: "missing", userId: "missing" } })
      .catch((e: unknown) => e);
    expect(fk).toBeInstanceOf(Prisma.PrismaClientKnownRequestError);
    expect((fk as Prisma.PrismaClientKnownRequestError).code).toBe("P2003"); // foreign keys are enforced
    expect(isUniqueViolation(fk)).toBe(false);
    const notFound = await h.db.user.update({ where: { id: "nope" }, data: { name: "x" } }).catch((e: unknown) => e);
    expect(isUniqueViolation(notFound)).toBe(false);
    expect(isUniqueViolation(new Error("P2002"))).toBe(false);
    expect(isUniqueViolation({ code: "P2002" })).toBe(false);
    expect(isUniqueViolation(null)).toBe(false);
    expect(uniqueViolationFields(new Error("x"))).toBeUndefined();
  });

  it("rolls back an interactive transaction that throws", async () => {
    await expect(
      h.db.$transaction(async (tx) => {
        await tx.organization.create({ data: { name: "rolled-back" } });
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(await h.db.organization.count({ where: { name: "rolled-back" } })).toBe(0);
  });
});

describe("SQLite connection", () => {
  const handle = useDatabase(freshSqlite);

  it("sets the connection pragmas", async () => {
    const one = async (pragma: string) => {
      const rows = await handle().db.$queryRawUnsafe<Record<string, unknown>[]>(`PRAGMA ${pragma}`);
      return Object.values(rows[0] ?? {})[0];
    };
    expect(await one("journal_mode")).toBe("wal");
    expect(Number(await one("foreign_keys"))).toBe(1);
    expect(Number(await one("synchronous"))).toBe(1); // NORMAL
    expect(Number(await one("busy_timeout"))).toBe(5000);
  });

  it("reuses prepared statements: each call gets its own arguments, past the cache's size too, and writes in transactions", async () => {
    const db = handle().db;
    // The same statement text with different arguments, interleaved with reads and writes.
    const pairs = await Promise.all(Array.from({ length: 50 }, (_, i) => db.$queryRawUnsafe<Array<{ v: number }>>("SELECT ? + ? AS v", i, 1000)));
    expect(pairs.map((r) => Number(r[0]!.v))).toEqual(Array.from({ length: 50 }, (_, i) => i + 1000));
    // More distinct statement texts than the cache holds (256): evicted ones are prepared again.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 300; i++) {
        const rows = await db.$queryRawUnsafe<Array<{ v: number }>>(`SELECT ? * ${i} AS v`, round + 1);
        expect(Number(rows[0]!.v)).toBe((round + 1) * i);
      }
    }
    // A reused write statement inside interactive transactions (BEGIN IMMEDIATE) and outside.
    await db.$executeRawUnsafe(`CREATE TABLE IF NOT EXISTS reuse_probe (k TEXT PRIMARY KEY, v INTEGER)`);
    for (let i = 0; i < 5; i++) {
      await db.$transaction(async (tx) => {
        await tx.$executeRawUnsafe(`INSERT INTO reuse_probe (k, v) VALUES (?, ?)`, `t${i}`, i);
      });
      await db.$executeRawUnsafe(`INSERT INTO reuse_probe (k, v) VALUES (?, ?)`, `n${i}`, i * 10);
    }
    const all = await db.$queryRawUnsafe<Array<{ k: string; v: number }>>(`SELECT k, v FROM reuse_probe ORDER BY k`);
    expect(all.map((r) => `${r.k}=${Number(r.v)}`)).toEqual(["n0=0", "n1=10", "n2=20", "n3=30", "n4=40", "t0=0", "t1=1", "t2=2", "t3=3", "t4=4"]);
  });

  it("waits for another connection's write lock without blocking the event loop", async () => {
    // A second client on the same file stands for a second `serve` worker. Both run on this one
    // thread, so a transaction that waited in SQLite's busy handler would stall the thread until its
    // busy timeout and fail with SQLITE_BUSY, the holder never getting the chance to commit.
    const other = await openDatabase({ databaseUrl: handle().url, dataDir: tmpdir() });
    const refusals = watchBusyBegins();
    try {
      const db = handle().db;
      await db.$executeRawUnsafe(`CREATE TABLE IF NOT EXISTS lock_probe (k TEXT PRIMARY KEY)`);
      let holding!: () => void;
      const held = new Promise<void>((r) => (holding = r));
      let finish!: () => void;
      const finished = new Promise<void>((r) => (finish = r));
      const holder = other.db.$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('holder')`);
          holding();
          await finished;
        },
        { timeout: 60_000 },
      );
      await held;
      let waiterDone = false;
      // Two statements: Prisma runs a batch of one without a transaction.
      const waiter = db
        .$transaction([
          db.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('waiter-1')`),
          db.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('waiter-2')`),
        ])
        .finally(() => {
        waiterDone = true;
      });
      // A single write outside any transaction waits the same way.
      let singleDone = false;
      const single = db.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('single')`).finally(() => {
        singleDone = true;
      });
      // The waiter's BEGIN IMMEDIATE is refused (SQLITE_BUSY, the holder has the lock) and tried again on a timer,
      // the event loop turning meanwhile: the waiters are waiting, neither done nor failed.
      await waitFor(() => `the waiter refused the write lock twice (${refusals.count} so far)`, () => refusals.count >= 2);
      expect(waiterDone).toBe(false);
      expect(singleDone).toBe(false);
      finish();
      await holder;
      await waiter;
      expect(await single).toBe(1);
      const rows = await db.$queryRawUnsafe<Array<{ k: string }>>(`SELECT k FROM lock_probe ORDER BY k`);
      expect(rows.map((r) => r.k)).toEqual(["holder", "single", "waiter-1", "waiter-2"]);
      // A failing single write is rolled back and leaves the connection usable.
      await expect(db.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('single')`)).rejects.toThrow();
      await db.$transaction([
        db.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('after-1')`),
        db.$executeRawUnsafe(`INSERT INTO lock_probe (k) VALUES ('after-2')`),
      ]);
      expect(await db.$queryRawUnsafe<Array<{ n: bigint }>>(`SELECT count(*) AS n FROM lock_probe`)).toEqual([{ n: 6n }]);
    } finally {
      refusals.restore();
      await other.close();
    }
  });
});

describe("resolveDatabaseUrl", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "portico-resolve-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("selects PostgreSQL for postgres:// and postgresql:// URLs", () => {
    for (const url of ["postgres://u@h/db", "postgresql://u:p@h:5433/db?sslmode=disable", "POSTGRESQL://h/db"]) {
      expect(resolveDatabaseUrl({ databaseUrl: url, dataDir: dir })).toEqual({ provider: "postgresql", url });
    }
  });

  it("defaults to ${dataDir}/portico.db and creates dataDir with mode 0700", () => {
    const dataDir = join(dir, "a", "data");
    for (const databaseUrl of [undefined, "", "  "]) {
      expect(resolveDatabaseUrl({ databaseUrl, dataDir })).toEqual({
        provider: "sqlite",
        url: `file:${join(dataDir, "portico.db")}`,
      });
    }
    expect(existsSync(dataDir)).toBe(true);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
  });

  it("accepts file: URLs", () => {
    const path = join(dir, "b", "x.db");
    expect(resolveDatabaseUrl({ databaseUrl: `file:${path}`, dataDir: "/nonexistent" })).toEqual({
      provider: "sqlite",
      url: `file:${path}`,
    });
    expect(existsSync(join(dir, "b"))).toBe(true);
  });

  it("rejects unknown schemes and in-memory SQLite", () => {
    expect(() => resolveDatabaseUrl({ databaseUrl: "mysql://h/db", dataDir: dir })).toThrow(/unsupported database URL/);
    expect(() => resolveDatabaseUrl({ databaseUrl: "file::memory:", dataDir: dir })).toThrow(/in-memory/);
  });

  it("redacts passwords for logging", () => {
    expect(redactDatabaseUrl("postgresql://user:s3cret@h:5432/db")).toBe("postgresql://user:***@h:5432/db");
    expect(redactDatabaseUrl("file:/tmp/x.db")).toBe("file:/tmp/x.db");
  });
});
