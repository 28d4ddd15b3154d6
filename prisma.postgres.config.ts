// Prisma CLI config for the PostgreSQL schema. Always pass it:
// `prisma <cmd> --config prisma.postgres.config.ts` (see stack notes §3).
//
// Env: DATABASE_URL (postgresql://…) for every migrate command (with `engine: "js"` even
// `migrate diff --from-empty` connects); SHADOW_DATABASE_URL only for commands that need a shadow
// database (`migrate dev`, `migrate diff --from-migrations`). The shadow database must already exist
// and is WIPED (its `public` schema is dropped and recreated) each time. `prisma generate` needs neither.
//
// Workarounds for @prisma/adapter-pg 6.19 (stack notes §3 pitfalls 4 and 5):
// - prisma/orm#27403: every migrate command fails with "Column type 'name' could not be deserialized"
//   (then `'char'` in migrate dev). The schema engine reads catalog columns of type name (OID 19),
//   "char" (OID 18) and name[] (OID 1003), which adapter-pg 6.19 cannot map. We patch pg's
//   `Result.prototype.addFields` so those columns are reported as text (25) / text[] (1009). pg returns
//   them as JS strings either way. Loaded only by this CLI config, never by the application.
// - The built-in shadow database handling is broken (it uses the real database as shadow with
//   `connectionString`, or leaves `prisma_migrate_shadow_db_<uuid>` behind). We connect to the fixed
//   SHADOW_DATABASE_URL instead and reset its `public` schema before use.
import { createRequire } from "node:module";
import { PrismaPg } from "@prisma/adapter-pg";
import { defineConfig } from "prisma/config";

interface FieldDescription {
  dataTypeID: number;
}
interface PgResultPrototype {
  addFields(fields: FieldDescription[]): void;
  __porticoOidPatch?: true;
}

const OID_REMAP: Record<number, number> = { 18: 25, 19: 25, 1003: 1009 };

function patchPgResultOids(): void {
  // Same module instance as the one adapter-pg uses (pg's ESM entry wraps lib/index.js).
  const require = createRequire(import.meta.url);
  const Result = require("pg/lib/result.js") as { prototype: PgResultPrototype };
  const proto = Result.prototype;
  if (proto.__porticoOidPatch) return;
  const original = proto.addFields;
  proto.addFields = function addFields(this: PgResultPrototype, fields: FieldDescription[]) {
    const mapped = fields.map((f) => {
      const to = OID_REMAP[f.dataTypeID];
      return to === undefined ? f : { ...f, dataTypeID: to };
    });
    original.call(this, mapped);
  };
  proto.__porticoOidPatch = true;
}
patchPgResultOids();

type PgAdapter = Awaited<ReturnType<PrismaPg["connect"]>>;

class PrismaPgFixedShadow extends PrismaPg {
  override async connectToShadowDb(): Promise<PgAdapter> {
    const url = process.env["SHADOW_DATABASE_URL"];
    if (!url) {
      throw new Error(
        "prisma.postgres.config.ts: this command needs a shadow database; set SHADOW_DATABASE_URL " +
          "to an existing, disposable database (its public schema is dropped)",
      );
    }
    if (url === process.env["DATABASE_URL"]) {
      throw new Error("prisma.postgres.config.ts: SHADOW_DATABASE_URL must differ from DATABASE_URL");
    }
    const adapter = await new PrismaPg({ connectionString: url, max: 1, allowExitOnIdle: true }).connect();
    await adapter.executeScript("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;");
    return adapter;
  }
}

function databaseUrl(): string {
  const url = process.env["DATABASE_URL"];
  if (!url || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new Error("prisma.postgres.config.ts: set DATABASE_URL to a postgresql:// URL");
  }
  return url;
}

export default defineConfig({
  engine: "js",
  experimental: { adapter: true },
  schema: "prisma/postgres/schema.prisma",
  migrations: { path: "prisma/postgres/migrations" },
  async adapter() {
    // allowExitOnIdle: otherwise every CLI command lingers ~10 s (pg's idleTimeoutMillis) before exiting.
    return new PrismaPgFixedShadow({ connectionString: databaseUrl(), allowExitOnIdle: true });
  },
});
