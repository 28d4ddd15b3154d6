/**
 * Generation ids: `gen-<uuid>`, the UUID in the version 7 layout (RFC 9562 §5.7): 48 bits of Unix time in
 * milliseconds, then 74 random bits (from node:crypto), with the version and variant bits set.
 *
 * Why time-ordered: the id is the Generation table's primary key, and a random key puts every insert on a random
 * leaf page of its index, so each flush of the generation records (src/core/chat/generations.ts) dirtied about one
 * page of that index per row, written to SQLite's WAL and checkpointed back again (PostgreSQL's B-tree likewise).
 * Ids made in time order land on the rightmost leaves. They stay unguessable (74 random bits, more than a session
 * token needs, though nothing authorizes by knowing an id) and are still valid UUIDs; what a version 7 id tells is
 * when it was made, to the millisecond, which the answer's `created` already tells to the second.
 */
import { randomFillSync } from "node:crypto";

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
/** Random bytes drawn 10 per id, refilled in one call every POOL_IDS ids (randomUUID caches its entropy alike). */
const POOL_IDS = 128;
const pool = Buffer.alloc(10 * POOL_IDS);
let next = pool.length;

/** A version 7 UUID (lowercase, hyphenated) for the time `ms` (default now). */
export function uuidv7(ms: number = Date.now()): string {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  const r = next;
  next += 10;
  // 48-bit timestamp: the top 32 bits and the low 16 (exact for any ms below 2^48, i.e. until the year 10889).
  const high = Math.floor(ms / 0x10000);
  const low = ms - high * 0x10000;
  return (
    HEX[(high >>> 24) & 0xff]! + HEX[(high >>> 16) & 0xff]! + HEX[(high >>> 8) & 0xff]! + HEX[high & 0xff]! + "-" +
    HEX[low >>> 8]! + HEX[low & 0xff]! + "-7" +
    HEX[pool[r]! & 0x0f]!.slice(1) + HEX[pool[r + 1]!]! + "-" +
    HEX[(pool[r + 2]! & 0x3f) | 0x80]! + HEX[pool[r + 3]!]! + "-" +
    HEX[pool[r + 4]!]! + HEX[pool[r + 5]!]! + HEX[pool[r + 6]!]! + HEX[pool[r + 7]!]! + HEX[pool[r + 8]!]! + HEX[pool[r + 9]!]!
  );
}

/** A new generation id: `gen-` and a version 7 UUID. */
export function generationId(): string {
  return `gen-${uuidv7()}`;
}
