import { it } from "vitest";
import { startHarness } from "/work/main/test/helpers/harness.js";
import { startFakeHost } from "/work/main/test/integration/interns/fake-host.js";
import { createTestIntern, chat, chatBody } from "/work/main/test/integration/interns/sse-client.js";
it("close", async () => {
  const h = await startHarness({ provider: "postgresql", env: { PORTICO_LINK_PING_INTERVAL_MS: "100", PORTICO_LINK_LIVENESS_TIMEOUT_MS: "600" } });
  const { internId, token } = await createTestIntern(h);
  const host = startFakeHost({ coreUrl: h.coreUrl, token });
  await host.welcome;
  const r = await chat(h, internId, chatBody("slow"), { key: h.tenant.apiKey, readForMs: 300 });
  console.log("chat done", r.chunks.length);
  host.kill();
  let t = Date.now();
  await h.gateway.close(); console.log("gw", Date.now() - t); t = Date.now();
  await h.coreServer.close(); console.log("cs", Date.now() - t); t = Date.now();
  await h.core.close(); console.log("core", Date.now() - t); t = Date.now();
  await h.database.close(); console.log("db", Date.now() - t);
}, 30000);
