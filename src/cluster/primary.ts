/**
 * The primary of a multi-process `portico serve`: forks one worker per CPU (PORTICO_WORKERS), each a full
 * core + gateway sharing the public ports through node:cluster, and holds what they share when there is
 * no Redis (src/cluster/ipc.ts): intern link leases, relayed cancellations and invalidations, chat
 * concurrency slots per key, and
 * rate-limiter-flexible's cluster master for the intern turn budget. With or without Redis it also sums
 * the workers' metrics for /metrics, which any worker may answer. The primary opens no database and
 * serves no request.
 *
 * A worker that dies is replaced (same index, so the embedded intern host comes back with worker 0); its
 * leases go with it. A worker that fails before it ever became ready stops the whole command: a bad port
 * or database would fail every replacement the same way. SIGTERM/SIGINT stop every worker gracefully.
 */
import cluster, { type Worker } from "node:cluster";
import { RateLimiterClusterMaster } from "rate-limiter-flexible";
import { AggregatorRegistry } from "prom-client";
import type { Logger } from "../log.js";
import type { LinkOwner } from "../core/interns/cluster.js";
import { IPC_CHANNEL, type PrimaryMessage, type ServeUrls, type WorkerMessage } from "./ipc.js";

export interface ServePrimaryOptions {
  workers: number;
  /** Base of the workers' instance ids (`<base>-w<index>`). */
  instanceId: string;
  logger: Logger;
  /** Node options of the workers (default: the primary's). */
  execArgv?: string[];
  /** Called when a worker failed during start-up: the command should stop. */
  onFatal: (reason: string) => void;
}

export interface ServePrimary {
  /** Resolves when every worker reported ready, with where they answer (the workers share the ports). */
  ready: Promise<ServeUrls | undefined>;
  /** Stops every worker (SIGTERM, then they run their own graceful stop) and resolves when all exited. */
  stop(): Promise<void>;
  /** Live workers by index (for tests and status). */
  workers(): Map<number, Worker>;
}

export function startServePrimary(opts: ServePrimaryOptions): ServePrimary {
  new RateLimiterClusterMaster();
  const metrics = new AggregatorRegistry();
  if (opts.execArgv) cluster.setupPrimary({ execArgv: opts.execArgv });
  const log = opts.logger.child({ component: "serve-primary" });
  const leases = new Map<string, LinkOwner>();
  // Concurrency slots (createIpcSlots): slot id → (key, worker index), and the count per key.
  const slots = new Map<string, { key: string; worker: number }>();
  const slotCounts = new Map<string, number>();
  const freeSlot = (slotId: string) => {
    const slot = slots.get(slotId);
    if (!slot) return;
    slots.delete(slotId);
    const left = (slotCounts.get(slot.key) ?? 1) - 1;
    if (left <= 0) slotCounts.delete(slot.key);
    else slotCounts.set(slot.key, left);
  };
  const byIndex = new Map<number, Worker>();
  const indexOf = new Map<Worker, number>();
  const instanceOf = (index: number) => `${opts.instanceId}-w${index}`;
  let stopping = false;
  let readyCount = 0;
  let markReady!: () => void;
  let urls: ServeUrls | undefined;
  const ready = new Promise<ServeUrls | undefined>((resolve) => (markReady = () => resolve(urls)));
  const everReady = new Set<number>();

  const sendTo = (w: Worker, msg: PrimaryMessage) => {
    if (w.isConnected()) w.send(msg);
  };
  const broadcast = (from: Worker, msg: PrimaryMessage) => {
    for (const w of byIndex.values()) if (w !== from) sendTo(w, msg);
  };

  const fork = (index: number) => {
    const w = cluster.fork({ PORTICO_WORKER_INDEX: String(index), PORTICO_INSTANCE_ID: instanceOf(index) });
    byIndex.set(index, w);
    indexOf.set(w, index);
    w.on("message", (raw: unknown) => {
      if (!raw || typeof raw !== "object" || (raw as { channel?: unknown }).channel !== IPC_CHANNEL) return;
      const msg = raw as WorkerMessage;
      switch (msg.type) {
        case "ready":
          if (!everReady.has(index)) {
            everReady.add(index);
            urls ??= msg.urls;
            readyCount++;
            if (readyCount === opts.workers) markReady();
          }
          log.info({ worker: index, pid: w.process.pid }, "worker ready");
          break;
        case "hold":
          leases.set(msg.internId, msg.owner);
          break;
        case "drop":
          if (leases.get(msg.internId)?.instanceId === msg.instanceId) leases.delete(msg.internId);
          break;
        case "owner?":
          sendTo(w, { channel: IPC_CHANNEL, type: "owner", requestId: msg.requestId, owner: leases.get(msg.internId) ?? null });
          break;
        case "cancel":
          broadcast(w, { channel: IPC_CHANNEL, type: "cancel", internId: msg.internId, runId: msg.runId, reason: msg.reason });
          break;
        case "bus":
          broadcast(w, { channel: IPC_CHANNEL, type: "bus", topic: msg.topic, key: msg.key });
          break;
        case "slot?": {
          const n = slotCounts.get(msg.key) ?? 0;
          const granted = n < msg.limit;
          if (granted) {
            slots.set(msg.slotId, { key: msg.key, worker: index });
            slotCounts.set(msg.key, n + 1);
          }
          sendTo(w, { channel: IPC_CHANNEL, type: "slot", requestId: msg.requestId, granted });
          break;
        }
        case "slot-release":
          freeSlot(msg.slotId);
          break;
        case "metrics?":
          metrics.clusterMetrics().then(
            (text) => sendTo(w, { channel: IPC_CHANNEL, type: "metrics", requestId: msg.requestId, text }),
            (err: unknown) => sendTo(w, { channel: IPC_CHANNEL, type: "metrics", requestId: msg.requestId, error: err instanceof Error ? err.message : String(err) }),
          );
          break;
      }
    });
    w.on("exit", (code, signal) => {
      byIndex.delete(index);
      indexOf.delete(w);
      const instance = instanceOf(index);
      for (const [internId, owner] of leases) if (owner.instanceId === instance) leases.delete(internId);
      for (const [slotId, slot] of slots) if (slot.worker === index) freeSlot(slotId);
      if (stopping) return;
      if (!everReady.has(index)) {
        log.error({ worker: index, code, signal }, "worker failed during start-up; stopping");
        opts.onFatal(`worker ${index} failed during start-up`);
        return;
      }
      log.warn({ worker: index, code, signal }, "worker exited; starting a replacement");
      everReady.delete(index);
      readyCount--;
      fork(index);
    });
  };

  for (let i = 0; i < opts.workers; i++) fork(i);

  return {
    ready,
    workers: () => byIndex,
    async stop() {
      stopping = true;
      const alive = [...byIndex.values()];
      await Promise.all(
        alive.map(
          (w) =>
            new Promise<void>((resolve) => {
              if (w.isDead()) return resolve();
              w.once("exit", () => resolve());
              w.process.kill("SIGTERM");
            }),
        ),
      );
    },
  };
}
