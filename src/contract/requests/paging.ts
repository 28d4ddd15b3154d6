/**
 * The one paging rule of every list (HTTP and gRPC): cursor paging. A page has at most `limit` items
 * (1 to 100, default 50); the answer says `has_more` and, when it is true, gives `next_cursor`, which the
 * next request passes as `starting_after`. `offset` is kept for the clients that used it before cursors
 * existed: it still skips that many items, cannot be combined with `starting_after`, and is refused
 * past its bounds like any other field. The gateway checks query strings with these definitions and
 * the core checks the RPC fields with the same ones, so bounds and messages are the same everywhere.
 */
import { integer, string } from "./kit.js";

export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 100;
export const MAX_OFFSET = 2_147_483_647;
/** Longest accepted cursor (ours are far shorter). */
export const MAX_CURSOR_CHARS = 512;

export const PageFields = {
  limit: integer({ min: 1, max: MAX_PAGE_LIMIT }).meta({ description: `Page size, 1 to ${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT}).` }),
  starting_after: string({ min: 1, max: MAX_CURSOR_CHARS }).meta({
    description: "Cursor: the `next_cursor` of the previous page; this page starts after the last item of that one. Opaque.",
  }),
  offset: integer({ min: 0, max: MAX_OFFSET }).meta({
    description: "Items to skip (default 0). Kept for existing clients; prefer `starting_after`, which neither skips nor repeats items while the list changes. Cannot be combined with `starting_after`.",
  }),
};

export const INVALID_CURSOR = "starting_after must be the next_cursor of a previous page of this list";
export const OFFSET_WITH_CURSOR = "offset cannot be combined with starting_after: page with starting_after alone";

/** The largest page of `GET /models` / `ListModels` (the list every client reads whole; docs/catalog.md). */
export const MAX_MODELS_LIMIT = 1000;

/**
 * The one list outside the cursor rule (docs/api.md#pagination): the model list (`GET /models`, gRPC
 * `ListModels`) pages by `offset` and `limit` as the real-world service's clients send them, and answers whole
 * without `limit`. The gateway checks the query string and the core the RPC fields with these definitions
 * (gRPC's 0 meaning absent), so both edges refuse the same values with the same messages.
 */
export const ModelsPageFields = {
  offset: integer({ min: 0, max: MAX_OFFSET }).meta({ description: "Entries to skip (default 0)." }),
  limit: integer({ min: 1, max: MAX_MODELS_LIMIT }).meta({ description: `At most this many entries (1 to ${MAX_MODELS_LIMIT}; default: all).` }),
};
