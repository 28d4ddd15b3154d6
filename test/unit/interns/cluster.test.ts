/**
 * The Redis side of the interns cross-instance path (src/core/interns/cluster.ts), against the real
 * Redis with a unique key prefix: the lease names the holder for everyone else, moves to a newer
 * holder, is dropped only by its holder, is refreshed while held; cancellations reach every core.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { createLocalCluster, createRedisCluster, type InternCluster } from "../../../src/core/interns/cluster.js";
import { CancelReason } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { waitFor } from "../../helpers/wait.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const prefix = `test-cluster-${randomBytes(6).toString("hex")}:`;


describe("Redis intern cluster", () => {
  const made: InternCluster[] = [];
  const cluster = (instanceId: string, leaseTtlMs = 3_000) => {
    const c = createRedisCluster({ redisUrl: REDIS_URL, prefix, instanceId, advertiseUrl: undefined, leaseTtlMs, logger: pino({ level: "silent" }) });
    c.setUrl(`http://${instanceId}.invalid:1`);
    made.push(c);
    return c;
  };
  const admin = new Redis(REDIS_URL);
  afterAll(async () => {
    for (const c of made) await c.close();
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length) await admin.del(...keys);
    admin.disconnect();
  });

  it("the lease names the holder to the others, moves to a newer holder, and is dropped only by its holder", async () => {
    const a = cluster("core-a");
    const b = cluster("core-b");
    a.holdLink("intern-1");
    expect(await waitFor("core-b to see core-a's lease", () => b.ownerOf("intern-1"))).toEqual({ instanceId: "core-a", url: "http://core-a.invalid:1" });
    expect(await a.ownerOf("intern-1")).toBeUndefined(); // never itself
    b.holdLink("intern-1");
    await waitFor("core-a to see core-b's lease", async () => (await a.ownerOf("intern-1"))?.instanceId === "core-b");
    a.dropLink("intern-1"); // not a's any more: b's lease stays
    // a's next command on the same connection runs after its drop: once b sees that lease, the drop is done.
    a.holdLink("intern-1-marker");
    await waitFor("core-b to see core-a's later lease", async () => (await b.ownerOf("intern-1-marker"))?.instanceId === "core-a");
    expect((await a.ownerOf("intern-1"))?.instanceId).toBe("core-b");
    b.dropLink("intern-1");
    await waitFor("the lease to go", async () => (await a.ownerOf("intern-1")) === undefined);
  });

  it("a lease outlives its TTL while held (refreshed) and goes when its holder closes", async () => {
    const a = cluster("core-c", 600);
    const b = cluster("core-d", 600);
    a.holdLink("intern-2");
    await waitFor("core-d to see core-c's lease", () => b.ownerOf("intern-2"));
    // Two lease lifetimes later it is still there (refreshed). Without the refresh it would be gone for good
    // after one lifetime; a refresh that a stall of this process delayed brings it back, so wait for it.
    const since = Date.now();
    await waitFor("core-c's lease two lifetimes later", async () => Date.now() - since > 1_200 && (await b.ownerOf("intern-2"))?.instanceId === "core-c");
    await a.close();
    await waitFor("the lease of a closed holder to go", async () => (await b.ownerOf("intern-2")) === undefined);
  });

  it("cancellations published by one core reach the others", async () => {
    const a = cluster("core-e");
    const b = cluster("core-f");
    const seen: Array<[string, string, CancelReason]> = [];
    b.onCancel((internId, runId, reason) => seen.push([internId, runId, reason]));
    // Published until b's subscription (set up asynchronously) has received one.
    await waitFor("core-f to receive a cancellation", async () => {
      await a.cancelRemote("intern-3", "run-1", CancelReason.DEADLINE).catch(() => undefined); // a not connected yet
      return seen.length > 0;
    });
    expect(seen[0]).toEqual(["intern-3", "run-1", CancelReason.DEADLINE]);
  });

  it("the in-memory variant knows no other process", async () => {
    const local = createLocalCluster();
    local.holdLink("x");
    expect(local.shared).toBe(false);
    expect(await local.ownerOf("x")).toBeUndefined();
    await local.close();
  });
});
