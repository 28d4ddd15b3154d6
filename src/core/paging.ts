/**
 * The one paging rule of every list the core serves (src/contract/requests/paging.ts): keyset (cursor)
 * paging over a total order, with `offset` kept for existing clients. Each list declares its order once
 * (`Ordering`: the sort keys, the last one unique); `checkPage` validates the request's fields with the
 * contract's definitions (INVALID_ARGUMENT naming the field), `keysetWhere` gives the Prisma condition
 * "after the cursor", `pageOf` cuts the rows read (limit + 1) into the page, `has_more` and `next_cursor`.
 * A cursor encodes the position of the last item (its sort-key values and the list's name), so it stays
 * valid when that item is changed or deleted, and items inserted meanwhile are neither repeated nor lost.
 */
import { validate } from "../contract/requests/kit.js";
import { DEFAULT_PAGE_LIMIT, INVALID_CURSOR, ModelsPageFields, OFFSET_WITH_CURSOR, PageFields } from "../contract/requests/paging.js";
import { checkRules, invalidArgument } from "./errors.js";

export interface SortKey {
  field: string;
  dir: "asc" | "desc";
  kind: "date" | "string" | "number";
}

/** A list's order: its name (cursors of one list are refused by another) and its sort keys, the last unique. */
export interface Ordering {
  list: string;
  keys: readonly SortKey[];
}

export interface PageRequest {
  limit: number;
  offset: number;
  /** The sort-key values of the cursor's item, when the request pages by cursor. */
  after?: unknown[];
}

export interface PageInput {
  /** 0 (proto3's absent) means the default. */
  limit?: number | undefined;
  offset?: number | undefined;
  startingAfter?: string | undefined;
}

export function createOrdering(list: string, keys: readonly SortKey[]): Ordering {
  return { list, keys };
}

/** Validates the paging fields of a list request; every failure is INVALID_ARGUMENT naming the field. */
export function checkPage(input: PageInput, order: Ordering): PageRequest {
  const rawLimit = input.limit ?? 0;
  const rawOffset = input.offset ?? 0;
  const limit = rawLimit === 0 ? DEFAULT_PAGE_LIMIT : checkRules(() => validate(PageFields.limit, rawLimit, "limit"));
  const offset = checkRules(() => validate(PageFields.offset, rawOffset, "offset"));
  if (input.startingAfter === undefined || input.startingAfter === "") return { limit, offset };
  if (offset !== 0) throw invalidArgument("offset", OFFSET_WITH_CURSOR);
  checkRules(() => validate(PageFields.starting_after, input.startingAfter, "starting_after"));
  return { limit, offset: 0, after: decodeCursor(input.startingAfter, order) };
}

/**
 * Validates the model list's offset paging (`ListModels`, the one list outside the cursor rule) with the
 * definitions the gateway checks `GET /models`' query with: INVALID_ARGUMENT naming the field. `limit` 0
 * (proto3's absent) means the whole list, given back as undefined.
 */
export function checkOffsetPage(input: { offset?: number | undefined; limit?: number | undefined }): { offset: number; limit: number | undefined } {
  const offset = checkRules(() => validate(ModelsPageFields.offset, input.offset ?? 0, "offset"));
  const rawLimit = input.limit ?? 0;
  const limit = rawLimit === 0 ? undefined : checkRules(() => validate(ModelsPageFields.limit, rawLimit, "limit"));
  return { offset, limit };
}

export function encodeCursor(order: Ordering, row: Record<string, unknown>): string {
  const values = order.keys.map((k) => {
    const v = row[k.field];
    return v instanceof Date ? v.getTime() : v;
  });
  return Buffer.from(JSON.stringify([order.list, ...values]), "utf8").toString("base64url");
}

export function decodeCursor(cursor: string, order: Ordering): unknown[] {
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error("not base64url");
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalidArgument("starting_after", INVALID_CURSOR);
  }
  if (!Array.isArray(parsed) || parsed.length !== order.keys.length + 1 || parsed[0] !== order.list) {
    throw invalidArgument("starting_after", INVALID_CURSOR);
  }
  return order.keys.map((k, i) => {
    const v = parsed[i + 1];
    if (k.kind === "string" && typeof v === "string") return v;
    if (k.kind === "number" && Number.isSafeInteger(v)) return v;
    if (k.kind === "date" && Number.isSafeInteger(v)) return new Date(v as number);
    throw invalidArgument("starting_after", INVALID_CURSOR);
  });
}

/** Prisma `orderBy` of the ordering. */
export function orderByOf(order: Ordering): Array<Record<string, "asc" | "desc">> {
  return order.keys.map((k) => ({ [k.field]: k.dir }));
}

/** The Prisma condition "strictly after the cursor's item" in the ordering, or undefined without a cursor. */
export function keysetWhere(order: Ordering, page: PageRequest): Record<string, unknown> | undefined {
  const after = page.after;
  if (!after) return undefined;
  const or = order.keys.map((k, i) => {
    const cond: Record<string, unknown> = {};
    for (let j = 0; j < i; j++) cond[order.keys[j]!.field] = after[j];
    cond[k.field] = { [k.dir === "asc" ? "gt" : "lt"]: after[i] };
    return cond;
  });
  return { OR: or };
}

/** `where` narrowed to the items after the cursor (when the page has one). */
export function pagedWhere<W extends object>(where: W, order: Ordering, page: PageRequest): W {
  const keyset = keysetWhere(order, page);
  return keyset ? ({ AND: [where, keyset] } as unknown as W) : where;
}

/** Prisma `findMany` arguments of a page: order, skip, take (one more than the page, to know has_more). */
export function findArgs(order: Ordering, page: PageRequest) {
  return { orderBy: orderByOf(order), skip: page.offset, take: page.limit + 1 };
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
  nextCursor?: string;
}

/** The page out of rows read with `findArgs` (limit + 1 of them at most). */
export function pageOf<T extends object>(rows: T[], order: Ordering, page: PageRequest): Page<T> {
  const items = rows.slice(0, page.limit);
  const hasMore = rows.length > page.limit;
  return hasMore ? { items, hasMore, nextCursor: encodeCursor(order, items.at(-1) as Record<string, unknown>) } : { items, hasMore };
}

/** The response fields of a page (`has_more`, `next_cursor`) in the services' message form. */
export function pageFields(page: { hasMore: boolean; nextCursor?: string | undefined }): { hasMore: boolean; nextCursor?: string } {
  return page.nextCursor !== undefined ? { hasMore: page.hasMore, nextCursor: page.nextCursor } : { hasMore: page.hasMore };
}
