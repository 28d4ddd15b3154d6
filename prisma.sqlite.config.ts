// Prisma CLI config for the SQLite schema. Always pass it: `prisma <cmd> --config prisma.sqlite.config.ts`
// (without a config, Prisma 6 tries to download the schema-engine binary; see stack notes §3).
//
// Migrate commands open the database named by DATABASE_URL ("file:/path/to/portico.db"). With
// `engine: "js"` even `migrate diff --from-empty` opens it (and creates an empty file). `prisma
// generate` does not need DATABASE_URL.
//
// Workaround (stack notes §3 pitfall 6): adapter-better-sqlite3 6.19 replays migration files into the
// shadow database with a multi-statement `executeRaw`, which better-sqlite3 rejects (`P3006 … External
// error id#0`). The shadow adapter is wrapped so that `executeRaw` calls without arguments go to
// `executeScript` (better-sqlite3 `exec`) instead.
import { PrismaBetterSQLite3 } from "@prisma/adapter-better-sqlite3";
import { defineConfig } from "prisma/config";

type ShadowAdapter = Awaited<ReturnType<PrismaBetterSQLite3["connectToShadowDb"]>>;

class PrismaBetterSQLite3ScriptShadow extends PrismaBetterSQLite3 {
  override async connectToShadowDb(): Promise<ShadowAdapter> {
    const adapter = await super.connectToShadowDb();
    return new Proxy(adapter, {
      get(target, prop) {
        if (prop === "executeRaw") {
          return async (query: Parameters<ShadowAdapter["executeRaw"]>[0]): Promise<number> => {
            if (query.args.length === 0) {
              await target.executeScript(query.sql);
              return 0;
            }
            return target.executeRaw(query);
          };
        }
        // Bind to the real adapter: it keeps state in #private fields a proxy cannot reach.
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}

function databaseUrl(): string {
  const url = process.env["DATABASE_URL"];
  if (!url) throw new Error('prisma.sqlite.config.ts: set DATABASE_URL (e.g. "file:./data/portico.db")');
  if (/^postgres(ql)?:\/\//i.test(url)) {
    throw new Error("prisma.sqlite.config.ts: DATABASE_URL is a PostgreSQL URL; use prisma.postgres.config.ts");
  }
  return url.startsWith("file:") ? url : `file:${url}`;
}

export default defineConfig({
  engine: "js",
  experimental: { adapter: true },
  schema: "prisma/sqlite/schema.prisma",
  migrations: { path: "prisma/sqlite/migrations" },
  async adapter() {
    return new PrismaBetterSQLite3ScriptShadow({ url: databaseUrl() });
  },
});
