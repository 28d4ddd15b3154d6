import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { freshSqlite } from "../../helpers/db.js";

// Prisma's SQLite adapter shares one connection; a write made outside a transaction while another
// request's transaction is open must not become part of it (and vanish when it rolls back).
describe("SQLite: writes outside a transaction are isolated from an open transaction", () => {
  let h: DatabaseHandle;
  beforeAll(async () => {
    h = await freshSqlite();
  });
  afterAll(async () => h?.close());

  it("keeps an outside write when a concurrent transaction rolls back", async () => {
    const db = h.db;
    let inside!: () => void;
    const insideReady = new Promise<void>((r) => (inside = r));
    let finish!: () => void;
    const mayFinish = new Promise<void>((r) => (finish = r));
    const rolledBack = db
      .$transaction(async (tx) => {
        await tx.$executeRaw`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${randomUUID()}, ${`tx-${randomUUID()}@x.invalid`}, ${"in tx"}, ${new Date()})`;
        inside();
        await mayFinish;
        throw new Error("roll back");
      })
      .catch((e: Error) => e.message);

    await insideReady;
    const outsideEmail = `outside-${randomUUID()}@x.invalid`;
    // A raw single statement (as hot paths use) is not wrapped in a transaction by Prisma.
    const outsideWrite = db.$executeRaw`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${randomUUID()}, ${outsideEmail}, ${"outside"}, ${new Date()})`;
    // While the transaction is open the outside write must wait rather than join it.
    const early = await Promise.race([
      outsideWrite.then(() => "ran inside the open transaction"),
      new Promise((r) => setTimeout(() => r("waited"), 100)),
    ]);
    expect(early).toBe("waited");
    finish();
    expect(await rolledBack).toBe("roll back");
    await outsideWrite;
    expect(await db.user.count({ where: { email: outsideEmail } })).toBe(1);
    expect(await db.user.count({ where: { name: "in tx" } })).toBe(0);
  });

  it("still runs independent transactions and queries concurrently to completion", async () => {
    const db = h.db;
    const n = 40;
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        i % 2 === 0
          ? db.$transaction(async (tx) => tx.user.create({ data: { email: `c-${i}-${randomUUID()}@x.invalid`, name: "conc" } }))
          : db.user.create({ data: { email: `c-${i}-${randomUUID()}@x.invalid`, name: "conc" } }),
      ),
    );
    expect(await db.user.count({ where: { name: "conc" } })).toBe(n);
  });
});
