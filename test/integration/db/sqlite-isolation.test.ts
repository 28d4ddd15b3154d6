import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { freshSqlite } from "../../helpers/db.js";
import { waitFor } from "../../helpers/wait.js";

/** How many callers wait their turn at a transaction gate now (src/db/sqlite-transaction-gate.ts, the real one, counted). */
const gates = vi.hoisted(() => ({ waiting: 0 }));
vi.mock("../../../src/db/sqlite-transaction-gate.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../../src/db/sqlite-transaction-gate.js")>();
  return {
    ...real,
    createTransactionGate() {
      const gate = real.createTransactionGate();
      const acquire = gate.acquire.bind(gate);
      return Object.assign(gate, {
        async acquire() {
          gates.waiting++;
          try {
            return await acquire();
          } finally {
            gates.waiting--;
          }
        },
      });
    },
  };
});

/**
 * Opens a transaction that inserts a user named `name`, then waits: `insideReady` resolves once the row is
 * written inside it, `finish()` lets it go on and roll back, `rolledBack` resolves with its error message.
 */
function openTransactionThatRollsBack(db: DatabaseHandle["db"], name: string) {
  let inside!: () => void;
  const insideReady = new Promise<void>((r) => (inside = r));
  let finish!: () => void;
  const mayFinish = new Promise<void>((r) => (finish = r));
  const rolledBack = db
    .$transaction(async (tx) => {
      await tx.$executeRaw`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${randomUUID()}, ${`tx-${randomUUID()}@x.invalid`}, ${name}, ${new Date()})`;
      inside();
      await mayFinish;
      throw new Error("roll back");
    })
    .catch((e: Error) => e.message);
  return { insideReady, finish, rolledBack };
}

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
    const { insideReady, finish, rolledBack } = openTransactionThatRollsBack(db, "in tx");

    await insideReady;
    const outsideEmail = `outside-${randomUUID()}@x.invalid`;
    // A raw single statement (as hot paths use) is not wrapped in a transaction by Prisma.
    const outsideWrite = db.$executeRaw`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${randomUUID()}, ${outsideEmail}, ${"outside"}, ${new Date()})`;
    // While the transaction is open the outside write must wait rather than join it: it reaches the gate and
    // waits there for the transaction's turn to end.
    let outsideDone = false;
    const outside = outsideWrite.then(() => (outsideDone = true));
    await waitFor("the outside write waiting at the transaction gate", () => gates.waiting === 1);
    expect(outsideDone).toBe(false);
    finish();
    expect(await rolledBack).toBe("roll back");
    await outside;
    expect(await db.user.count({ where: { email: outsideEmail } })).toBe(1);
    expect(await db.user.count({ where: { name: "in tx" } })).toBe(0);
  });

  it("keeps a write made with executeRaw (past the Prisma client) out of an open transaction that rolls back", async () => {
    const db = h.db;
    const { insideReady, finish, rolledBack } = openTransactionThatRollsBack(db, "in tx 2");
    await insideReady;
    const outsideEmail = `raw-${randomUUID()}@x.invalid`;
    const outsideWrite = h.executeRaw(`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (?, ?, ?, ?)`, [randomUUID(), outsideEmail, "outside raw", new Date().toISOString().replace(/Z$/, "+00:00")]);
    finish();
    expect(await rolledBack).toBe("roll back");
    // Run inside the transaction, the row would have been rolled back with it.
    expect(await outsideWrite).toBe(1);
    expect(await db.user.count({ where: { email: outsideEmail } })).toBe(1);
    expect(await db.user.count({ where: { name: "in tx 2" } })).toBe(0);
  });

  it("runs a queryRaw read (past the Prisma client) outside an open transaction: it never sees its rows", async () => {
    const db = h.db;
    const { insideReady, finish, rolledBack } = openTransactionThatRollsBack(db, "in tx 4");
    await insideReady;
    const read = h.queryRaw("", `SELECT COUNT(*) FROM "User" WHERE "name" = ?`, ["in tx 4"]);
    finish();
    expect(await rolledBack).toBe("roll back");
    // Run inside the transaction, it would have counted the row the transaction then rolled back.
    expect(Number((await read)[0]![0])).toBe(0);
  });

  it("keeps a writeSqlite call (on the connection itself) out of an open transaction that rolls back", async () => {
    const db = h.db;
    const { insideReady, finish, rolledBack } = openTransactionThatRollsBack(db, "in tx 3");
    await insideReady;
    const outsideEmail = `direct-${randomUUID()}@x.invalid`;
    let ran = false;
    const outsideWrite = h.writeSqlite!((c) => {
      ran = true;
      return c.prepare(`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (?, ?, ?, ?)`).run([randomUUID(), outsideEmail, "outside direct", new Date().toISOString().replace(/Z$/, "+00:00")]).changes;
    });
    // It waits at the gate for the transaction to end rather than run inside it.
    await waitFor("the writeSqlite call waiting at the transaction gate", () => gates.waiting === 1);
    expect(ran).toBe(false);
    finish();
    expect(await rolledBack).toBe("roll back");
    expect(await outsideWrite).toBe(1);
    expect(await db.user.count({ where: { email: outsideEmail } })).toBe(1);
    expect(await db.user.count({ where: { name: "in tx 3" } })).toBe(0);
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

describe("SQLite: a read-then-write transaction survives another process writing in between", () => {
  it("makes the other process wait instead of failing the transaction with SQLITE_BUSY_SNAPSHOT", async () => {
    const { spawn } = await import("node:child_process");
    const { resolve } = await import("node:path");
    const a = await freshSqlite();
    const dataDir = a.url.slice("file:".length).replace(/\/[^/]*$/, "");
    try {
      let readDone!: () => void;
      const afterRead = new Promise<void>((r) => (readDone = r));
      let mayWrite!: () => void;
      const writeGate = new Promise<void>((r) => (mayWrite = r));
      const tx = a.db
        .$transaction(
          async (t) => {
            const before = await t.$queryRaw<Array<{ n: unknown }>>`SELECT COUNT(*) AS n FROM "User"`;
            readDone();
            await writeGate;
            await t.$executeRaw`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${randomUUID()}, ${`a-${randomUUID()}@x.invalid`}, ${`after ${String(before[0]?.n)}`}, ${new Date()})`;
          },
          { timeout: 30_000 },
        )
        .then(
          () => "ok",
          (e: Error) => `failed: ${e.message}`,
        );
      await afterRead;
      // Another process writes while this transaction holds its read snapshot.
      const child = spawn(process.execPath, [resolve(import.meta.dirname, "../../../bin/run-ts.mjs"), resolve(import.meta.dirname, "../../helpers/sqlite-write-child.ts"), dataDir], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      let childOut = "";
      let waiting!: () => void;
      const childWaiting = new Promise<void>((r) => (waiting = r));
      child.stdout.on("data", (d) => {
        childOut += d;
        if (childOut.includes("waiting\n")) waiting();
      });
      const childDone = new Promise<void>((r) => child.on("exit", () => r()));
      // Its INSERT waits for this transaction's lock: SQLite refused it once (or it ended, and the check below says how).
      await Promise.race([childWaiting, childDone]);
      mayWrite();
      expect(await tx).toBe("ok");
      await childDone;
      expect(childOut.trim().split("\n")).toEqual(["opened", "waiting", "ok"]);
      expect(await a.db.user.count()).toBe(2);
    } finally {
      await a.close();
    }
  });
});
