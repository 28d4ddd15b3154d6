/**
 * First start on a PostgreSQL server where the named database does not exist yet: create it when the
 * role may (CREATEDB or superuser), otherwise stop with the command an administrator has to run.
 */
import { redactDatabaseUrl } from "./client.js";

const INVALID_CATALOG_NAME = "3D000"; // database does not exist
const INSUFFICIENT_PRIVILEGE = "42501";
const DUPLICATE_DATABASE = "42P04";
const UNIQUE_VIOLATION = "23505";

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Resolves once the database of `url` exists (creating it if needed and allowed). */
export async function ensurePostgresDatabase(url: string, log?: (msg: string) => void): Promise<void> {
  const { default: pg } = await import("pg");
  const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  probe.on("error", () => undefined);
  try {
    await probe.connect();
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== INVALID_CATALOG_NAME) throw err;
  } finally {
    await probe.end().catch(() => undefined);
  }
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ""));
  const maintenance = new URL(url);
  maintenance.pathname = "/postgres";
  const admin = new pg.Client({ connectionString: maintenance.toString(), connectionTimeoutMillis: 10_000 });
  admin.on("error", () => undefined);
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${quoteIdent(name)}`);
    log?.(`created database ${name}`);
  } catch (err) {
    const code = (err as { code?: string }).code;
    // Another process created it meanwhile: PostgreSQL says 42P04, or, when both CREATEs ran at once,
    // 23505 on pg_database's name index (seen with two `serve` workers starting together).
    if (code === DUPLICATE_DATABASE || code === UNIQUE_VIOLATION) return;
    const how = `create it as a role that may, e.g. psql -c 'CREATE DATABASE ${quoteIdent(name)} OWNER ${quoteIdent(decodeURIComponent(target.username) || "postgres")}'`;
    const why = code === INSUFFICIENT_PRIVILEGE ? "this role may not create databases" : (err as Error).message;
    throw new Error(`DATABASE_URL (${redactDatabaseUrl(url)}): database ${name} does not exist and could not be created (${why}); ${how}`, { cause: err });
  } finally {
    await admin.end().catch(() => undefined);
  }
}
