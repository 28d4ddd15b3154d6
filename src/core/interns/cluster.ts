/**
 * The cross-instance path of the interns domain: which core process holds an intern's host link,
 * and how another process reaches it.
 *
 * One process (SQLite default, or no REDIS_URL): `createLocalCluster()`, nothing is shared; a link
 * is served only by the process that holds it.
 *
 * Several processes (REDIS_URL): `createRedisCluster()`. The process that holds an intern's link
 * keeps a lease in Redis (`<prefix>intern-link:<internId>` = {instanceId, url}, PX TTL, refreshed
 * while the link lives, compare-and-deleted when it closes). A process that receives a prompt or an
 * answer for an intern whose link it does not hold forwards the StreamChat call, unchanged, to the
 * lease's URL over gRPC (see interns-handler.ts). Deadline cancellations decided by a process that
 * does not hold the link are published on `<prefix>intern-cancel` and applied by the holder.
 * Everything else (runs, interactions, the session turn lock, deadlines) is in the database, where
 * races are settled by conditional updates. In a `portico serve` worker the primary's IPC lease map is the
 * fallback: while Redis is unreachable, a worker still finds the worker of its own serve holding a link.
 */
import { createRedisClient, type Redis } from "../../lib/redis.js";
import type { Logger } from "pino";
import type { CancelReason } from "../../gen/portico/internlink/v1/internlink_service_pb.js";

export interface LinkOwner {
  instanceId: string;
  /** The owner's core URL (Connect/gRPC), where StreamChat calls are forwarded. */
  url: string;
}

export interface InternCluster {
  /** False for the in-memory, single-process variant. */
  readonly shared: boolean;
  /** This process now holds the intern's link: publish the lease and keep it fresh. */
  holdLink(internId: string): void;
  /** The link closed here: drop the lease when it still names this process. */
  dropLink(internId: string): void;
  /** The other process that holds the intern's link, per its lease; undefined when none does. */
  ownerOf(internId: string): Promise<LinkOwner | undefined>;
  /** Asks whichever process holds the intern's link to cancel a run. */
  cancelRemote(internId: string, runId: string, reason: CancelReason): Promise<void>;
  /** Handles cancellations other processes publish. */
  onCancel(handler: (internId: string, runId: string, reason: CancelReason) => void): void;
  /** The URL other processes forward to (known once the core listens). */
  setUrl(url: string): void;
  close(): Promise<void>;
}

export function createLocalCluster(): InternCluster {
  return {
    shared: false,
    holdLink: () => undefined,
    dropLink: () => undefined,
    ownerOf: async () => undefined,
    cancelRemote: async () => undefined,
    onCancel: () => undefined,
    setUrl: () => undefined,
    close: async () => undefined,
  };
}

export interface RedisClusterOptions {
  redisUrl: string;
  /** Prefix of every key and channel (several deployments may share one Redis). */
  prefix: string;
  instanceId: string;
  /** URL to advertise; when unset, the one given to setUrl() once the core listens. */
  advertiseUrl: string | undefined;
  /** Lease lifetime; refreshed every third of it. */
  leaseTtlMs: number;
  logger: Logger;
  /**
   * Asked when Redis fails or knows no holder: in a `portico serve` worker, the primary's lease map
   * (src/cluster/ipc.ts), which knows which worker of this serve holds a link whatever Redis does.
   * Links held here are announced to it too, and cancellations go through it when Redis cannot publish.
   */
  fallback?: InternCluster;
}

const DROP_IF_MINE = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`;

export function createRedisCluster(opts: RedisClusterOptions): InternCluster {
  const log = opts.logger.child({ component: "intern-cluster" });
  const redisOptions = {
    maxRetriesPerRequest: 1,
    connectTimeout: 1_000,
    commandTimeout: 1_000,
    retryStrategy: (attempt: number) => Math.min(100 * attempt, 2_000),
  };
  // Commands fail at once while Redis is unreachable (a request never waits on it); the lease refresher
  // rewrites held leases when it is back. The subscriber queues its SUBSCRIBE until connected.
  const redis = createRedisClient(opts.redisUrl, { ...redisOptions, enableOfflineQueue: false });
  const sub = createRedisClient(opts.redisUrl, redisOptions);
  let reachable = true;
  const onError = (err: Error) => {
    if (reachable) log.warn({ err: { message: err.message } }, "intern cluster: Redis is not reachable; each core serves only the interns whose link it holds");
    reachable = false;
  };
  redis.on("error", onError);
  sub.on("error", onError);


  const leaseKey = (internId: string) => `${opts.prefix}intern-link:${internId}`;
  const cancelChannel = `${opts.prefix}intern-cancel`;
  let url = opts.advertiseUrl;
  const held = new Set<string>();
  const handlers: Array<(internId: string, runId: string, reason: CancelReason) => void> = [];

  const leaseValue = () => JSON.stringify({ instanceId: opts.instanceId, url });
  async function writeLeases(ids: Iterable<string>): Promise<void> {
    if (!url) return;
    const pipe = redis.pipeline();
    for (const id of ids) pipe.set(leaseKey(id), leaseValue(), "PX", opts.leaseTtlMs);
    await pipe.exec();
  }
  redis.on("ready", () => {
    reachable = true;
    if (held.size > 0) writeLeases(held).catch((err: unknown) => onError(err as Error));
  });
  const refresher = setInterval(() => {
    if (held.size > 0) writeLeases(held).catch((err: unknown) => onError(err as Error));
  }, Math.max(100, Math.floor(opts.leaseTtlMs / 3)));
  refresher.unref();

  void sub.subscribe(cancelChannel).catch((err: unknown) => onError(err as Error));
  sub.on("message", (channel: string, text: string) => {
    if (channel !== cancelChannel) return;
    try {
      const m = JSON.parse(text) as { internId: string; runId: string; reason: CancelReason };
      for (const h of handlers) h(m.internId, m.runId, m.reason);
    } catch (err) {
      log.warn({ err }, "ignored a malformed cancellation message");
    }
  });

  return {
    shared: true,
    holdLink(internId) {
      held.add(internId);
      opts.fallback?.holdLink(internId);
      writeLeases([internId]).catch((err: unknown) => onError(err as Error));
    },
    dropLink(internId) {
      held.delete(internId);
      opts.fallback?.dropLink(internId);
      if (!url) return;
      redis.eval(DROP_IF_MINE, 1, leaseKey(internId), leaseValue()).catch((err: unknown) => onError(err as Error));
    },
    async ownerOf(internId) {
      let text: string | null;
      try {
        text = await redis.get(leaseKey(internId));
      } catch (err) {
        onError(err as Error);
        return opts.fallback?.ownerOf(internId);
      }
      if (!text) return opts.fallback?.ownerOf(internId);
      try {
        const owner = JSON.parse(text) as LinkOwner;
        if (owner.instanceId === opts.instanceId || typeof owner.url !== "string") return undefined;
        return owner;
      } catch {
        return undefined;
      }
    },
    async cancelRemote(internId, runId, reason) {
      try {
        await redis.publish(cancelChannel, JSON.stringify({ internId, runId, reason }));
      } catch (err) {
        if (!opts.fallback) throw err;
        onError(err as Error);
        await opts.fallback.cancelRemote(internId, runId, reason);
      }
    },
    onCancel(handler) {
      handlers.push(handler);
      opts.fallback?.onCancel(handler);
    },
    setUrl(u) {
      opts.fallback?.setUrl(u);
      if (url) return;
      url = u;
      if (held.size > 0) writeLeases(held).catch((err: unknown) => onError(err as Error));
    },
    async close() {
      clearInterval(refresher);
      const ids = [...held];
      held.clear();
      if (url) {
        await Promise.all(ids.map((id) => redis.eval(DROP_IF_MINE, 1, leaseKey(id), leaseValue()).catch(() => undefined)));
      }
      redis.disconnect();
      sub.disconnect();
      await opts.fallback?.close();
    },
  };
}
