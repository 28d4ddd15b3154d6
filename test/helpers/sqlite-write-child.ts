/**
 * Child process for SQLite multi-process tests: opens the database in argv[2] (a data folder) and
 * inserts one user, printing "opened" once the database is open (the insert follows at once), "waiting" when SQLite
 * first refuses it the write lock (another connection holds it; it tries again), then "ok" or the error message.
 */
import { randomUUID } from "node:crypto";
import { openDatabase } from "../../src/db/client.js";
import { watchBusyBegins } from "./sqlite-busy.js";

const dataDir = process.argv[2];
if (!dataDir) throw new Error("usage: sqlite-write-child <dataDir>");
const h = await openDatabase({ dataDir, migrate: false });
process.stdout.write("opened\n");
watchBusyBegins((n) => n === 1 && process.stdout.write("waiting\n"));
try {
  await h.db.$executeRaw`INSERT INTO "User" ("id", "email", "name", "createdAt") VALUES (${randomUUID()}, ${`child-${randomUUID()}@x.invalid`}, ${"child"}, ${new Date()})`;
  process.stdout.write("ok\n");
} catch (err) {
  process.stdout.write(`failed: ${(err as Error).message.replace(/\s+/g, " ")}\n`);
} finally {
  await h.close();
}
