/**
 * Coordination of `portico serve` worker processes (node:cluster) without Redis: the primary process is
 * the single holder of the shared state and relays messages (src/cluster/primary.ts); workers reach it
 * over the cluster's IPC channel. Nothing here elects, votes or gossips: the primary is the authority
 * by construction, exactly like Redis is for several `portico core` processes, and a worker's entries
 * disappear with the worker.
 *
 * - intern link leases: which worker holds an intern's host link, and the worker's internal core URL;
 * - cancellations of runs decided by a worker that does not hold the link;
 * - the invalidation bus (API keys and other caches);
 * - /metrics: the primary gathers every worker's registry with prom-client's AggregatorRegistry.
 * - concurrency slots per key (chat completions in flight per API key): the primary counts them and drops a
 *   worker's slots when it exits.
 * The intern turn limit uses rate-limiter-flexible's own cluster limiter (its master lives in the primary).
 */
import cluster from "node:cluster";
import { AggregatorRegistry, type Registry } from "prom-client";
import type { InternCluster, LinkOwner } from "../core/interns/cluster.js";
import type { CancelReason } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { createLocalInvalidationBus, type InvalidationBus } from "../lib/invalidation.js";
import { once, take, type ConcurrencyLimiter } from "../lib/concurrency-limiter.js";

/** Marks Portico's IPC messages (other libraries share the channel). */
export const IPC_CHANNEL = "portico";

export type WorkerMessage =
  | { channel: typeof IPC_CHANNEL; type: "ready"; urls?: ServeUrls }
  | { channel: typeof IPC_CHANNEL; type: "hold"; internId: string; owner: LinkOwner }
  | { channel: typeof IPC_CHANNEL; type: "drop"; internId: string; instanceId: string }
  | { channel: typeof IPC_CHANNEL; type: "owner?"; requestId: number; internId: string }
  | { channel: typeof IPC_CHANNEL; type: "cancel"; internId: string; runId: string; reason: number }
  | { channel: typeof IPC_CHANNEL; type: "bus"; topic: string; key: string }
  | { channel: typeof IPC_CHANNEL; type: "metrics?"; requestId: number }
  | { channel: typeof IPC_CHANNEL; type: "slot?"; requestId: number; slotId: string; key: string; limit: number }
  | { channel: typeof IPC_CHANNEL; type: "slot-release"; slotId: string };

export type PrimaryMessage =
  | { channel: typeof IPC_CHANNEL; type: "owner"; requestId: number; owner: LinkOwner | null }
  | { channel: typeof IPC_CHANNEL; type: "cancel"; internId: string; runId: string; reason: number }
  | { channel: typeof IPC_CHANNEL; type: "bus"; topic: string; key: string }
  | { channel: typeof IPC_CHANNEL; type: "metrics"; requestId: number; text?: string; error?: string }
  | { channel: typeof IPC_CHANNEL; type: "slot"; requestId: number; granted: boolean };

/** True in a worker process of `portico serve` (forked by the primary). */
export function isServeWorker(): boolean {
  return cluster.isWorker && typeof process.send === "function";
}

function send(msg: WorkerMessage): void {
  if (process.connected) process.send!(msg);
}

function onPrimaryMessage(fn: (msg: PrimaryMessage) => void): () => void {
  const listener = (msg: unknown) => {
    if (msg && typeof msg === "object" && (msg as { channel?: unknown }).channel === IPC_CHANNEL) fn(msg as PrimaryMessage);
  };
  process.on("message", listener);
  return () => void process.off("message", listener);
}

/**
 * Requests to the primary whose reply carries the same `requestId`: `ask` resolves with the reply, or with
 * undefined when none comes within `timeoutMs` or the requests are abandoned.
 */
function createPrimaryRequests<R>() {
  const waiting = new Map<number, (reply: R | undefined) => void>();
  let nextId = 1;
  return {
    ask(message: (requestId: number) => WorkerMessage, timeoutMs: number): Promise<R | undefined> {
      const requestId = nextId++;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(requestId);
          resolve(undefined);
        }, timeoutMs);
        waiting.set(requestId, (reply) => {
          clearTimeout(timer);
          resolve(reply);
        });
        send(message(requestId));
      });
    },
    answer(requestId: number, reply: R): void {
      waiting.get(requestId)?.(reply);
      waiting.delete(requestId);
    },
    abandon(): void {
      for (const resolve of waiting.values()) resolve(undefined);
      waiting.clear();
    },
  };
}

export function createIpcCluster(opts: { instanceId: string; advertiseUrl: string | undefined; timeoutMs?: number }): InternCluster {
  let url = opts.advertiseUrl;
  const held = new Set<string>();
  const owners = createPrimaryRequests<LinkOwner | undefined>();
  const cancelHandlers: Array<(internId: string, runId: string, reason: CancelReason) => void> = [];
  const off = onPrimaryMessage((msg) => {
    if (msg.type === "owner") {
      owners.answer(msg.requestId, msg.owner ?? undefined);
    } else if (msg.type === "cancel") {
      for (const h of cancelHandlers) h(msg.internId, msg.runId, msg.reason as CancelReason);
    }
  });
  const announce = (internId: string) => {
    if (url) send({ channel: IPC_CHANNEL, type: "hold", internId, owner: { instanceId: opts.instanceId, url } });
  };
  return {
    shared: true,
    holdLink(internId) {
      held.add(internId);
      announce(internId);
    },
    dropLink(internId) {
      held.delete(internId);
      send({ channel: IPC_CHANNEL, type: "drop", internId, instanceId: opts.instanceId });
    },
    async ownerOf(internId) {
      if (!process.connected) return undefined;
      const owner = await owners.ask((requestId) => ({ channel: IPC_CHANNEL, type: "owner?", requestId, internId }), opts.timeoutMs ?? 2_000);
      return owner && owner.instanceId !== opts.instanceId ? owner : undefined;
    },
    async cancelRemote(internId, runId, reason) {
      send({ channel: IPC_CHANNEL, type: "cancel", internId, runId, reason });
    },
    onCancel(handler) {
      cancelHandlers.push(handler);
    },
    setUrl(u) {
      if (opts.advertiseUrl) return;
      url = u;
      for (const id of held) announce(id);
    },
    async close() {
      for (const id of held) send({ channel: IPC_CHANNEL, type: "drop", internId: id, instanceId: opts.instanceId });
      held.clear();
      off();
      owners.abandon();
    },
  };
}

/** Where a `portico serve` answers: the gateway's origin (console at /console/, API at /api/v1) and the core's. */
export interface ServeUrls {
  gateway: string;
  core: string;
}

/** Tells the primary this worker finished start-up (listening, first run done), and where it answers. */
export function reportReady(urls?: ServeUrls): void {
  send({ channel: IPC_CHANNEL, type: "ready", urls });
}

/** The invalidation bus of a worker: delivered here at once, and to the other workers through the primary. */
export function createIpcInvalidationBus(): InvalidationBus {
  const local = createLocalInvalidationBus();
  const off = onPrimaryMessage((msg) => {
    if (msg.type === "bus") void local.publish(msg.topic, msg.key);
  });
  return {
    async publish(topic, key) {
      await local.publish(topic, key);
      send({ channel: IPC_CHANNEL, type: "bus", topic, key });
    },
    subscribe: (topic, fn) => local.subscribe(topic, fn),
    async close() {
      off();
      await local.close();
    },
  };
}

/**
 * /metrics of a worker: asks the primary for every worker's metrics summed (counters and histograms
 * added, gauges per prom-client's aggregators), and answers the primary's collection with `registry`.
 * Rejects when the primary does not answer in time or a worker's collection failed.
 */
export function createIpcMetrics(registry: Registry, timeoutMs = 6_000): () => Promise<string> {
  AggregatorRegistry.setRegistries(registry);
  new AggregatorRegistry(); // installs prom-client's listener that answers the primary's collection
  const replies = createPrimaryRequests<{ text?: string; error?: string }>();
  onPrimaryMessage((msg) => {
    if (msg.type === "metrics") replies.answer(msg.requestId, msg);
  });
  return async () => {
    if (!process.connected) throw new Error("the serve primary is gone");
    const reply = await replies.ask((requestId) => ({ channel: IPC_CHANNEL, type: "metrics?", requestId }), timeoutMs);
    if (!reply) throw new Error("the serve primary did not answer with the workers' metrics in time");
    if (typeof reply.text === "string") return reply.text;
    throw new Error(`collecting the workers' metrics failed: ${reply.error ?? "no answer"}`);
  };
}

/**
 * Concurrency slots counted by the primary, so the workers of one `portico serve` share one bound per key. A
 * slot whose answer does not come within `timeoutMs` (a primary that stopped answering) is taken from a
 * per-process count instead, and released at the primary too in case its grant was only late.
 */
export function createIpcSlots(opts: { instanceId: string; timeoutMs?: number }): ConcurrencyLimiter {
  const replies = createPrimaryRequests<boolean>();
  const off = onPrimaryMessage((msg) => {
    if (msg.type === "slot") replies.answer(msg.requestId, msg.granted);
  });
  const local = new Map<string, number>();
  let next = 1;
  return {
    async acquire(key, limit) {
      const slotId = `${opts.instanceId}:${next++}`;
      const granted = await replies.ask((requestId) => ({ channel: IPC_CHANNEL, type: "slot?", requestId, slotId, key, limit }), opts.timeoutMs ?? 2_000);
      if (granted === undefined) {
        send({ channel: IPC_CHANNEL, type: "slot-release", slotId });
        return take(local, key, limit);
      }
      if (!granted) return null;
      return once(() => send({ channel: IPC_CHANNEL, type: "slot-release", slotId }));
    },
    async close() {
      off();
      replies.abandon();
    },
  };
}
