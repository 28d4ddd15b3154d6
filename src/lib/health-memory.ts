/**
 * The health memory: "this key is cooling until T". One store per process, read on every chat request and
 * written only when something failed (or first succeeded again after failing). Keys are opaque here; the chat
 * routing names credentials and endpoints (src/core/chat/routing/health.ts says which failure cools which).
 *
 * Growth: a failure cools its key for `baseMs` × 2^(n−1), capped at `maxMs`, n being the number of consecutive
 * failures (defaults 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s: PORTICO_COOLDOWN_BASE_MS, PORTICO_COOLDOWN_MAX_MS). A
 * failure while the key is already cooling (a request sent before the cool-down began) does not grow the count,
 * so a burst of concurrent failures counts once; it cools the key again from now at the same step. A provider's
 * own wait (`Retry-After`) replaces the step when given, and a later end always wins over an earlier one. A
 * success forgets the count and ends a cool-down the growth set (not a provider's wait, which runs out). A count
 * without a new failure is forgotten {@link FORGET_AFTER_MS} after its cool-down ended.
 *
 * Reads are local and synchronous: never a round trip. Three implementations: memory (this process only), the
 * workers of one `portico serve` without Redis ({@link createBusHealthMemory}: messages through the primary), and
 * Redis with REDIS_URL ({@link createRedisHealthMemory}): each process keeps the same local map; a change is
 * written to Redis (`SET … PX`, the later end kept) and published in the same script; every other process
 * applies the message to its map; a process starting (or reconnecting) loads what Redis holds (a burst of failures
 * of one key is written once: {@link SHARE_STEP_MS}). Redis being
 * unreachable never fails a request: the process goes on with its own map, noting which keys it changed meanwhile;
 * once Redis is back (after the load) it writes those of them still cooling, so the other processes learn them.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { InvalidationBus } from "./invalidation.js";
import { createRedisClient, type Redis } from "./redis.js";

export interface HealthMemory {
  /** The epoch ms at which `key`'s cool-down ends, when it is cooling at `now`; else undefined. Local only. */
  coolingUntil(key: string, now?: number): number | undefined;
  /**
   * A failure of `key`: cools it for the next step of its growth, or for `retryAfterMs` (the provider's wait)
   * when given. Returns the epoch ms at which its cool-down ends (never earlier than one already known).
   */
  failed(key: string, retryAfterMs?: number, now?: number): number;
  /** A success of `key`: forgets its failures. Costs one map look-up when it had none. */
  succeeded(key: string, now?: number): void;
  close(): Promise<void>;
}

export interface HealthMemoryOptions {
  /** The first cool-down, ms (default {@link DEFAULT_COOLDOWN_BASE_MS}). */
  baseMs?: number;
  /** The longest grown cool-down, ms (default {@link DEFAULT_COOLDOWN_MAX_MS}); a provider's wait may be longer. */
  maxMs?: number;
  /** Keys remembered at most; the least recently changed go first (default 10 000). */
  maxEntries?: number;
  now?: () => number;
}

export const DEFAULT_COOLDOWN_BASE_MS = 1_000;
export const DEFAULT_COOLDOWN_MAX_MS = 30_000;
/** A failure count is forgotten this long after its last cool-down ended without a new failure. */
export const FORGET_AFTER_MS = 300_000;
/**
 * A failure that only moves a known cool-down's end later by less than this is kept here but not shared: a burst
 * of concurrent failures is one write to Redis, not one per request (the others' ends may be this much earlier).
 */
export const SHARE_STEP_MS = 250;

/** What is known of one key. */
export interface HealthState {
  /** Epoch ms at which the cool-down ends (in the past: not cooling, the count still remembered). */
  until: number;
  /** Consecutive failures. */
  streak: number;
  /** The end is a provider's own wait (a success does not cut it short). */
  told: boolean;
}

/** The cool-down of the `streak`-th consecutive failure. */
export function growthStep(streak: number, baseMs = DEFAULT_COOLDOWN_BASE_MS, maxMs = DEFAULT_COOLDOWN_MAX_MS): number {
  if (streak <= 1) return Math.min(baseMs, maxMs);
  // 2^30 × 1 ms is already beyond any cap worth setting.
  return Math.min(baseMs * 2 ** Math.min(streak - 1, 30), maxMs);
}

/**
 * The local map both implementations keep. `onChange` is told every change this process made (not those
 * merged from elsewhere), with the state after it (`undefined`: forgotten).
 */
export class LocalHealth {
  /** `shared`: the end last told to the other processes (or learnt from them). */
  private readonly states = new Map<string, HealthState & { shared?: number }>();
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly maxEntries: number;
  readonly now: () => number;

  constructor(
    opts: HealthMemoryOptions = {},
    private readonly onChange?: (key: string, state: HealthState | undefined) => void,
  ) {
    this.baseMs = opts.baseMs ?? DEFAULT_COOLDOWN_BASE_MS;
    this.maxMs = Math.max(opts.maxMs ?? DEFAULT_COOLDOWN_MAX_MS, this.baseMs);
    this.maxEntries = Math.max(1, opts.maxEntries ?? 10_000);
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.states.size;
  }

  /** The state of `key`, dropping it when it is to be forgotten. */
  get(key: string, now = this.now()): (HealthState & { shared?: number }) | undefined {
    if (this.states.size === 0) return undefined;
    const s = this.states.get(key);
    if (s !== undefined && s.until + FORGET_AFTER_MS <= now) {
      this.states.delete(key);
      return undefined;
    }
    return s;
  }

  coolingUntil(key: string, now = this.now()): number | undefined {
    const s = this.get(key, now);
    return s !== undefined && s.until > now ? s.until : undefined;
  }

  failed(key: string, retryAfterMs?: number, now = this.now()): number {
    const known = this.get(key, now);
    const cooling = known !== undefined && known.until > now;
    const streak = cooling ? Math.max(known.streak, 1) : (known?.streak ?? 0) + 1;
    const told = retryAfterMs !== undefined;
    const end = now + (told ? Math.max(0, retryAfterMs) : growthStep(streak, this.baseMs, this.maxMs));
    const next: HealthState =
      known !== undefined && known.until >= end ? { until: known.until, streak, told: known.told } : { until: end, streak, told };
    const material =
      known === undefined || next.streak !== known.streak || next.told !== known.told || next.until - (known.shared ?? 0) >= SHARE_STEP_MS;
    this.put(key, { ...next, shared: material ? next.until : known.shared });
    if (material) this.onChange?.(key, next);
    return next.until;
  }

  succeeded(key: string, now = this.now()): void {
    const known = this.get(key, now);
    if (known === undefined || (known.streak === 0 && known.told && known.until > now)) return; // nothing new
    const next = known.told && known.until > now ? { until: known.until, streak: 0, told: true } : undefined;
    if (next) this.put(key, { ...next, shared: next.until });
    else this.states.delete(key);
    this.onChange?.(key, next);
  }

  /** Merges a state another process made: the later end and the longer count win. */
  merge(key: string, other: HealthState, now = this.now()): void {
    if (other.until + FORGET_AFTER_MS <= now) return;
    const known = this.get(key, now);
    if (known === undefined) return this.put(key, { ...other, shared: other.until });
    const later = other.until > known.until ? other : known;
    this.put(key, { until: later.until, streak: Math.max(known.streak, other.streak), told: later.told, shared: Math.max(other.until, known.shared ?? 0) });
  }

  /** Applies another process's success: its state replaces this one's. */
  replace(key: string, other: HealthState | undefined): void {
    if (other === undefined) this.states.delete(key);
    else this.put(key, { ...other, shared: other.until });
  }

  private put(key: string, state: HealthState & { shared?: number | undefined }): void {
    this.states.delete(key); // re-inserted last: insertion order is the eviction order
    this.states.set(key, state);
    while (this.states.size > this.maxEntries) this.states.delete(this.states.keys().next().value!);
  }
}

/** The health memory of this process alone. */
export function createMemoryHealthMemory(opts: HealthMemoryOptions = {}): HealthMemory & { readonly size: number } {
  const local = new LocalHealth(opts);
  return {
    coolingUntil: (key, now) => local.coolingUntil(key, now),
    failed: (key, retryAfterMs, now) => local.failed(key, retryAfterMs, now),
    succeeded: (key, now) => local.succeeded(key, now),
    get size() {
      return local.size;
    },
    async close() {},
  };
}

/** A state as stored in Redis and sent in messages: `<until>:<streak>:<told 0/1>`. */
const encode = (s: HealthState) => `${Math.round(s.until)}:${s.streak}:${s.told ? 1 : 0}`;
function decode(text: string): HealthState | undefined {
  const m = /^(\d+):(\d+):([01])$/.exec(text);
  return m ? { until: Number(m[1]), streak: Number(m[2]), told: m[3] === "1" } : undefined;
}

/** A change as sent between processes: `<origin>|<f|r>|<state or ->|<key>` (the key last: it may hold any character). */
const message = (origin: string, kind: "f" | "r", state: HealthState | undefined, key: string) =>
  `${origin}|${kind}|${state ? encode(state) : "-"}|${key}`;

/** Applies another process's message to `local`; returns its key, or undefined when it was this process's own or not one. */
function applyMessage(local: LocalHealth, origin: string, raw: string): string | undefined {
  const a = raw.indexOf("|");
  const b = raw.indexOf("|", a + 1);
  const c = raw.indexOf("|", b + 1);
  if (a < 0 || b < 0 || c < 0 || raw.slice(0, a) === origin) return undefined;
  const kind = raw.slice(a + 1, b);
  const state = raw.slice(b + 1, c) === "-" ? undefined : decode(raw.slice(b + 1, c));
  const key = raw.slice(c + 1);
  if (kind === "f" && state) local.merge(key, state);
  else if (kind === "r") local.replace(key, state);
  else return undefined;
  return key;
}

/** The bus topic of the health memory's messages ({@link createBusHealthMemory}). */
export const HEALTH_TOPIC = "health";

/**
 * The health memory of the workers of one `portico serve` without Redis: each keeps its map, and a change is sent
 * to the others over the invalidation bus (through the primary). Nothing is stored: a worker started later
 * learns only the changes made after it.
 */
export function createBusHealthMemory(opts: HealthMemoryOptions & { bus: InvalidationBus; onShared?: (key: string) => void }): HealthMemory & { readonly size: number } {
  const origin = randomUUID();
  const local = new LocalHealth(opts, (key, state) => {
    opts.bus.publish(HEALTH_TOPIC, message(origin, state !== undefined && state.streak > 0 ? "f" : "r", state, key)).catch(() => undefined);
  });
  const off = opts.bus.subscribe(HEALTH_TOPIC, (raw) => {
    const key = applyMessage(local, origin, raw);
    if (key !== undefined) opts.onShared?.(key);
  });
  return {
    coolingUntil: (key, now) => local.coolingUntil(key, now),
    failed: (key, retryAfterMs, now) => local.failed(key, retryAfterMs, now),
    succeeded: (key, now) => local.succeeded(key, now),
    get size() {
      return local.size;
    },
    async close() {
      off();
    },
  };
}

export interface RedisHealthMemoryOptions extends HealthMemoryOptions {
  redisUrl: string;
  /** PORTICO_REDIS_PREFIX: keys are `<prefix>health:<key>`, the channel `<prefix>health`. */
  prefix: string;
  logger?: Pick<Logger, "warn" | "info">;
  /** Told each message of another process once applied (tests wait on it). */
  onShared?: (key: string) => void;
}

export interface RedisHealthMemory extends HealthMemory {
  /** Resolves once the first load from Redis ended (loaded, or Redis unreachable). */
  readonly loaded: Promise<void>;
  readonly size: number;
}

/**
 * KEYS[1] the key in Redis. ARGV: until, streak, told (0/1), now, forget ms, channel, origin, the key's name.
 * Keeps the later end and the longer count, sets the expiry from them, publishes the merged state.
 */
const FAILED = `
local u, s, t = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local cur = redis.call('GET', KEYS[1])
if cur then
  local cu, cs, ct = string.match(cur, '^(%d+):(%d+):([01])$')
  if cu then
    cu = tonumber(cu)
    cs = tonumber(cs)
    if cu > u then u = cu; t = ct end
    if cs > s then s = cs end
  end
end
local state = string.format('%.0f:%.0f:%s', u, s, t)
local ttl = math.max(u - tonumber(ARGV[4]), 0) + tonumber(ARGV[5])
redis.call('SET', KEYS[1], state, 'PX', string.format('%.0f', ttl))
redis.call('PUBLISH', ARGV[6], ARGV[7] .. '|f|' .. state .. '|' .. ARGV[8])
return 1
`;

/** The health memory shared through Redis (see the module comment); reads stay local. */
export function createRedisHealthMemory(opts: RedisHealthMemoryOptions): RedisHealthMemory {
  const origin = randomUUID(); // this process's messages, already applied locally
  const channel = `${opts.prefix}health`;
  const keyPrefix = `${opts.prefix}health:`;
  const redisOptions = { maxRetriesPerRequest: 0, connectTimeout: 2_000, commandTimeout: 1_000, retryStrategy: (n: number) => Math.min(100 * n, 2_000) };
  const redis: Redis = createRedisClient(opts.redisUrl, { ...redisOptions, enableOfflineQueue: false });
  // No autoResubscribe: ioredis's own resubscription leaves its promise unhandled when the connection drops at
  // once; `sync` below subscribes again on every "ready", with the rejection caught.
  const sub: Redis = createRedisClient(opts.redisUrl, { ...redisOptions, autoResubscribe: false });
  redis.defineCommand("porticoHealthFailed", { numberOfKeys: 1, lua: FAILED });
  const scriptFailed = (key: string, s: HealthState, now: number, name: string) =>
    (redis as unknown as { porticoHealthFailed(...args: (string | number)[]): Promise<unknown> }).porticoHealthFailed(
      key,
      Math.round(s.until),
      s.streak,
      s.told ? 1 : 0,
      Math.round(now),
      FORGET_AFTER_MS,
      channel,
      origin,
      name,
    );

  /**
   * Keys whose change could not be written (Redis unreachable, or the write failed): once Redis is back, those still
   * cooling are written then ({@link replay}). At most as many as the local map holds; the oldest go first.
   */
  const unsent = new Set<string>();
  const maxUnsent = Math.max(1, opts.maxEntries ?? 10_000);
  const noteUnsent = (key: string) => {
    unsent.delete(key);
    unsent.add(key);
    if (unsent.size > maxUnsent) unsent.delete(unsent.values().next().value!);
  };
  const local = new LocalHealth(opts, (key, state) => {
    // Fire and forget: a request never waits on Redis; unreachable, the change stays in this process until it is back.
    if (redis.status !== "ready") return noteUnsent(key);
    const now = local.now();
    if (state !== undefined && state.streak > 0) {
      scriptFailed(keyPrefix + key, state, now, key).catch(() => noteUnsent(key));
      return;
    }
    const tx = redis.multi();
    if (state === undefined) tx.del(keyPrefix + key);
    else tx.set(keyPrefix + key, encode(state), "PX", Math.max(0, state.until - now) + FORGET_AFTER_MS);
    tx.publish(channel, message(origin, "r", state, key));
    tx.exec().catch(() => undefined);
  });

  // Subscribe first, then load: a change made in between arrives by message, and merging twice is harmless.
  // Runs whenever either connection becomes ready with the other one ready too (start, every reconnection:
  // messages were missed meanwhile).
  let first = true;
  let resolveLoaded!: () => void;
  const loaded = new Promise<void>((r) => (resolveLoaded = r));
  const firstDone = () => {
    if (!first) return;
    first = false;
    clearTimeout(giveUp);
    resolveLoaded();
  };
  const giveUp = setTimeout(firstDone, redisOptions.connectTimeout + 1_000);
  giveUp.unref();
  let warned = false;
  redis.on("error", (err: Error) => {
    firstDone(); // unreachable: the first load is over, with nothing loaded
    if (warned) return;
    warned = true;
    opts.logger?.warn(
      { component: "health-memory", err: { message: err.message } },
      "redis unreachable; the health memory (cool-downs) is per process until it is back",
    );
  });
  sub.on("error", () => undefined);

  sub.on("message", (ch: string, raw: string) => {
    if (ch !== channel) return;
    const key = applyMessage(local, origin, raw);
    if (key !== undefined) opts.onShared?.(key);
  });

  /** Reads every state Redis holds under the prefix into the local map. */
  async function load(): Promise<void> {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${keyPrefix}*`, "COUNT", 500);
      cursor = next;
      if (keys.length === 0) continue;
      const values = await redis.mget(...keys);
      keys.forEach((k, i) => {
        const state = values[i] ? decode(values[i]!) : undefined;
        if (state) local.merge(k.slice(keyPrefix.length), state);
      });
    } while (cursor !== "0");
  }

  /**
   * Writes (and publishes) the cool-downs this process set while Redis was unreachable and that are still in force,
   * merged with what Redis holds (the later end, the longer count). A success made meanwhile is not replayed: the
   * cool-down another process stored runs out by itself, and the next success there ends it.
   */
  async function replay(): Promise<void> {
    if (unsent.size === 0) return;
    const keys = [...unsent];
    unsent.clear();
    const now = local.now();
    const writes: Promise<unknown>[] = [];
    for (const key of keys) {
      const state = local.get(key, now);
      if (state === undefined || state.until <= now) continue;
      writes.push(scriptFailed(keyPrefix + key, state, now, key).catch(() => noteUnsent(key)));
    }
    await Promise.all(writes);
  }

  let syncing = false;
  const sync = async () => {
    if (syncing || sub.status !== "ready" || redis.status !== "ready") return;
    syncing = true;
    try {
      await sub.subscribe(channel);
      await load();
      await replay();
      firstDone();
    } catch {
      // unreachable again: the next "ready" retries
    } finally {
      syncing = false;
    }
  };
  sub.on("ready", () => void sync());
  redis.on("ready", () => {
    if (warned) opts.logger?.info({ component: "health-memory" }, "redis reachable again; the health memory is shared across processes again");
    warned = false;
    void sync();
  });

  return {
    coolingUntil: (key, now) => local.coolingUntil(key, now),
    failed: (key, retryAfterMs, now) => local.failed(key, retryAfterMs, now),
    succeeded: (key, now) => local.succeeded(key, now),
    loaded,
    get size() {
      return local.size;
    },
    async close() {
      clearTimeout(giveUp);
      sub.disconnect();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
