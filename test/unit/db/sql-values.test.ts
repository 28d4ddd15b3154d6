/**
 * Times as the raw statements write them (src/db/sql-values.ts): `sqliteDateTime` is Prisma's SQLite DATETIME text
 * (`toISOString()` with `+00:00` for `Z`) and `isoDateTime` is `toISOString()`, both made from the text of the second
 * kept from the call before: the same text for times in the same second, the second before or after, far apart, before
 * 1970 and in the extended years; an invalid date throws as toISOString() does.
 */
import { describe, expect, it } from "vitest";
import { isoDateTime, sqliteDateTime } from "../../../src/db/sql-values.js";

const prismaText = (d: Date) => `${d.toISOString().slice(0, -1)}+00:00`;

describe("sqliteDateTime and isoDateTime", () => {
  it("match toISOString() for every millisecond of a second, across seconds and far apart", () => {
    const base = Date.UTC(2026, 10, 27, 3, 3, 6, 0);
    const times = [
      ...Array.from({ length: 1000 }, (_, ms) => base + ms),
      base - 1, base + 1000, base + 999, base - 1000, base, base + 61_000, base - 86_400_000,
      0, -1, -999, -1000, -1001, 999, 1000, 8.64e15, -8.64e15, Date.UTC(9999, 11, 31, 23, 59, 59, 999), Date.UTC(10000, 0, 1),
    ];
    for (const t of [...times, ...times.reverse()]) {
      const d = new Date(t);
      expect(sqliteDateTime(d)).toBe(prismaText(d));
      expect(isoDateTime(d)).toBe(d.toISOString());
    }
  });

  it("alternate between two seconds without mixing their texts", () => {
    const a = new Date(Date.UTC(2026, 0, 1, 0, 0, 0, 5));
    const b = new Date(Date.UTC(2026, 0, 1, 0, 0, 1, 50));
    for (let i = 0; i < 3; i++) {
      expect(sqliteDateTime(a)).toBe("2026-01-01T00:00:00.005+00:00");
      expect(isoDateTime(b)).toBe("2026-01-01T00:00:01.050Z");
    }
  });

  it("throw toISOString()'s RangeError for an invalid date", () => {
    expect(() => sqliteDateTime(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => isoDateTime(new Date(Number.NaN))).toThrow(RangeError);
  });
});
