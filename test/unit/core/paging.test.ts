/**
 * The one paging rule (src/core/paging.ts): bounds and messages from the contract's definitions, the
 * cursor's round trip, refusals naming the field, and the keyset condition of an ordering.
 */
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { checkPage, createOrdering, encodeCursor, keysetWhere, pageOf } from "../../../src/core/paging.js";

const order = createOrdering("things", [
  { field: "createdAt", dir: "desc", kind: "date" },
  { field: "id", dir: "desc", kind: "string" },
]);

function refusal(fn: () => unknown): { field: unknown; message: string } {
  try {
    fn();
  } catch (err) {
    const e = ConnectError.from(err);
    return { field: errorDetailOf(e)?.field, message: e.rawMessage };
  }
  throw new Error("expected a refusal");
}

describe("checkPage", () => {
  it("defaults limit 0 (proto3's absent) to 50 and keeps offset", () => {
    expect(checkPage({ limit: 0, offset: 0 }, order)).toEqual({ limit: 50, offset: 0 });
    expect(checkPage({ limit: 100, offset: 7 }, order)).toEqual({ limit: 100, offset: 7 });
  });

  it.each([
    [{ limit: 101 }, "limit must be an integer between 1 and 100, got 101"],
    [{ limit: -1 }, "limit must be an integer between 1 and 100, got -1"],
    [{ offset: -1 }, "offset must be an integer between 0 and 2147483647, got -1"],
    [{ startingAfter: "not a cursor!" }, "starting_after must be the next_cursor of a previous page of this list"],
    [{ startingAfter: Buffer.from('["other",1,"x"]').toString("base64url") }, "starting_after must be the next_cursor of a previous page of this list"],
    [{ startingAfter: "x".repeat(513) }, "starting_after must be at most 512 characters long"],
  ])("refuses %j", (input, message) => {
    expect(() => checkPage(input, order)).toThrow(ConnectError);
    expect(refusal(() => checkPage(input, order))).toEqual({ field: message.split(" ")[0], message });
  });

  it("refuses offset with a cursor, naming offset", () => {
    const cursor = encodeCursor(order, { createdAt: new Date(5), id: "b" });
    expect(refusal(() => checkPage({ offset: 3, startingAfter: cursor }, order))).toEqual({
      field: "offset",
      message: "offset cannot be combined with starting_after: page with starting_after alone",
    });
  });

  it("round-trips a cursor into the keyset condition of the ordering", () => {
    const at = new Date(1_700_000_000_123);
    const page = checkPage({ startingAfter: encodeCursor(order, { createdAt: at, id: "b" }) }, order);
    expect(page.after).toEqual([at, "b"]);
    expect(keysetWhere(order, page)).toEqual({ OR: [{ createdAt: { lt: at } }, { createdAt: at, id: { lt: "b" } }] });
  });

  it("cuts limit + 1 rows into a page with has_more and the cursor of its last item", () => {
    const rows = [1, 2, 3].map((n) => ({ createdAt: new Date(n), id: `i${n}` }));
    const page = checkPage({ limit: 2 }, order);
    const cut = pageOf(rows, order, page);
    expect(cut.items).toEqual(rows.slice(0, 2));
    expect(cut.hasMore).toBe(true);
    expect(checkPage({ startingAfter: cut.nextCursor }, order).after).toEqual([new Date(2), "i2"]);
    expect(pageOf(rows.slice(0, 2), order, page)).toEqual({ items: rows.slice(0, 2), hasMore: false });
  });
});
