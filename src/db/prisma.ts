/**
 * The one place application code gets Prisma's namespace helpers and model types from.
 *
 * Everything comes from the SQLite generated client: the model row types and `Prisma.InputJsonValue`
 * are interchangeable between the two generated clients, and at runtime `Prisma.DbNull`,
 * `Prisma.JsonNull`, `Prisma.AnyNull` and `PrismaClientKnownRequestError` are the same objects in
 * both (one shared @prisma/client runtime), so they work against PostgreSQL too (stack notes §3).
 * Never import src/generated/postgres outside src/db/client.ts.
 */
export { Prisma } from "../generated/sqlite/client.js";
export type {
  ApiKey,
  ByokCredential,
  Intern,
  InternInteraction,
  InternRun,
  InternSession,
  KeyringKey,
  Membership,
  Organization,
  Preset,
  PresetVersion,
  User,
  Workspace,
  WorkspaceMember,
  AuditEvent,
} from "../generated/sqlite/client.js";
import { Prisma } from "../generated/sqlite/client.js";

/** Stores SQL NULL in a nullable Json column. */
export const DbNull = Prisma.DbNull;
/** Stores the JSON value `null` in a Json column. */
export const JsonNull = Prisma.JsonNull;
/** Matches either in a filter. */
export const AnyNull = Prisma.AnyNull;
export const PrismaClientKnownRequestError = Prisma.PrismaClientKnownRequestError;
export type PrismaClientKnownRequestError = Prisma.PrismaClientKnownRequestError;
/** A value accepted when writing a Json column. */
export type InputJsonValue = Prisma.InputJsonValue;
/** A value read from a Json column. */
export type JsonValue = Prisma.JsonValue;
/** The `tx` of an interactive `db.$transaction(async (tx) => …)`, canonical (SQLite) type. */
export type DbTransaction = Prisma.TransactionClient;
