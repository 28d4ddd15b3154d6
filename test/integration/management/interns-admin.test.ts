import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { startFakeHost, type FakeHost, type FakeRun } from "../interns/fake-host.js";
import { answerBody, chat, chatBody, finalOf, toolCallOf } from "../interns/sse-client.js";

const ENV = {
  PORTICO_INTERN_START_TIMEOUT_MS: "2000",
  PORTICO_LINK_PING_INTERVAL_MS: "100",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "2000",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

describe.each(["sqlite", "postgresql"] as const)("intern management (%s)", (provider) => {
  let h: Harness;
  let outsider: Tenant;
  let mk: string;
  let adminGrpc: any;
  const hosts: FakeHost[] = [];
  const prompts: string[] = [];

  /** A fake host that records prompts; "ask…" pauses on a question, anything else completes. */
  const attach = (token: string) => {
    const host = startFakeHost({
      coreUrl: h.coreUrl,
      token,
      onStart: (run: FakeRun, fh: FakeHost) => {
        prompts.push(run.start.prompt);
        const id = run.start.runId;
        fh.emit(id, { case: "started", value: {} as never });
        if (run.start.prompt.endsWith("ask")) {
          run.pendingQuestion = { id: "q-" + id, options: ["allow_once", "reject_once"] };
          fh.emit(id, { case: "question", value: { interactionId: "q-" + id, kind: "permission", operation: "shell", options: ["allow_once", "reject_once"] } as never });
          return true;
        }
        fh.emit(id, { case: "content", value: { text: "ok" } as never });
        fh.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
        run.ended = true;
        return true;
      },
    });
    hosts.push(host);
    return host;
  };

  beforeAll(async () => {
    h = await startHarness({ provider, env: ENV });
    mk = h.tenant.managementKey;
    outsider = await h.createTenant({ internsProgramme: false });
    adminGrpc = grpcClient("portico/internadmin/v1/internadmin_service.proto", "portico.internadmin.v1.InternAdminService", h.coreUrl);
  });
  afterAll(async () => {
    for (const host of hosts) host.kill();
    adminGrpc?.close();
    await h?.close();
  });

  it("creates an intern with a host token shown once, shows its host and sessions, and hands instructions to each new session", async () => {
    const created = await api(h, "POST", "/interns", {
      key: mk,
      body: { name: "reviewer", description: "reviews PRs", instructions: "Always answer in French.", model: "openai/gpt-4o", provision: false },
    });
    expect(created.status).toBe(201);
    const intern = created.json;
    expect(intern).toMatchObject({
      name: "reviewer",
      description: "reviews PRs",
      instructions: "Always answer in French.",
      model: "openai/gpt-4o",
      status: "awaiting_host",
      workspace_id: h.tenant.workspaceId,
      progress: null,
      vault_id: null,
      host: { attached: false, has_token: true, agent: null },
      sessions: [],
    });
    expect(intern.host_token).toMatch(/^pht-v1-[0-9a-f]{64}$/);
    const got = await api(h, "GET", `/interns/${intern.id}`, { key: mk });
    expect(got.json.host_token).toBeUndefined();
    expect(got.text).not.toContain(intern.host_token);

    const host = attach(intern.host_token);
    await host.welcome;
    const attached = await api(h, "GET", `/interns/${intern.id}`, { key: mk });
    expect(attached.json).toMatchObject({ status: "running", host: { attached: true, agent: "fake-agent", instance: h.config.instanceId } });
    expect(attached.json.hostname).toBe(h.config.instanceId);

    const first = await chat(h, intern.id, chatBody("ask"), { key: h.tenant.apiKey });
    const call = toolCallOf(first.chunks);
    const sessionId = finalOf(first.chunks).session_id;
    expect(prompts.at(-1)).toBe("Always answer in French.\n\nask");
    const paused = await api(h, "GET", `/interns/${intern.id}`, { key: mk });
    expect(paused.json.sessions).toEqual([expect.objectContaining({ session_id: sessionId, state: "paused" })]);
    // Deleting while a run waits for an answer is refused.
    expect((await api(h, "DELETE", `/interns/${intern.id}`, { key: mk })).status).toBe(409);

    await chat(h, intern.id, answerBody(sessionId, call.id, "allow_once"), { key: h.tenant.apiKey });
    await chat(h, intern.id, chatBody("again", { session_id: sessionId }), { key: h.tenant.apiKey });
    expect(prompts.at(-1)).toBe("again");
    const idle = await api(h, "GET", `/interns/${intern.id}`, { key: mk });
    expect(idle.json.sessions).toEqual([]);

    const updated = await api(h, "PATCH", `/interns/${intern.id}`, { key: mk, body: { instructions: null, model: null, name: "critic" } });
    expect(updated.json).toMatchObject({ name: "critic", instructions: null, model: null });
    await chat(h, intern.id, chatBody("fresh"), { key: h.tenant.apiKey });
    expect(prompts.at(-1)).toBe("fresh");

    const list = await api(h, "GET", "/interns?status=running", { key: mk });
    expect(list.json.data.map((i: any) => i.id)).toContain(intern.id);
    expect((await api(h, "GET", "/interns?status=stopped", { key: mk })).json.data.map((i: any) => i.id)).not.toContain(intern.id);

    const audit = await api(h, "GET", `/audit?target_id=${intern.id}`, { key: mk });
    expect(audit.json.data.map((e: any) => e.action).sort()).toEqual(["intern.create", "intern.update"]);
    expect(audit.text).not.toContain("Always answer in French.");
    expect(audit.text).not.toContain(intern.host_token);
  });

  it("suspends (link closed, prompts 409, attaches refused), provisions, rotates and revokes host tokens, deletes", async () => {
    const intern = (await api(h, "POST", "/interns", { key: mk, body: { name: "worker" } })).json;
    const host = attach(intern.host_token);
    await host.welcome;
    const suspended = await api(h, "POST", `/interns/${intern.id}/suspend`, { key: mk });
    expect(suspended.json).toEqual({ suspended: true });
    await host.closed;
    const refused = await chat(h, intern.id, chatBody("hi"), { key: h.tenant.apiKey });
    expect(refused.status).toBe(409);
    expect(refused.json.error.metadata.reason).toBe("intern_not_ready");
    const again = attach(intern.host_token);
    await expect(again.welcome).rejects.toBeDefined();
    expect((await api(h, "GET", `/interns/${intern.id}`, { key: mk })).json.status).toBe("stopped");

    const provisioned = await api(h, "POST", `/interns/${intern.id}/provision`, { key: mk });
    expect(provisioned.status).toBe(202);
    expect(provisioned.json).toEqual({ provisioning: true });
    const back = attach(intern.host_token);
    await back.welcome;

    const rotated = await api(h, "POST", `/interns/${intern.id}/host-token`, { key: mk });
    expect(rotated.status).toBe(200);
    expect(rotated.json.host_token).toMatch(/^pht-v1-/);
    expect(rotated.json.host_token).not.toBe(intern.host_token);
    await back.closed;
    await expect(attach(intern.host_token).welcome).rejects.toBeDefined();
    const fresh = attach(rotated.json.host_token);
    await fresh.welcome;

    expect((await api(h, "DELETE", `/interns/${intern.id}/host-token`, { key: mk })).json).toEqual({ revoked: true });
    await fresh.closed;
    expect((await api(h, "GET", `/interns/${intern.id}`, { key: mk })).json.host.has_token).toBe(false);
    await expect(attach(rotated.json.host_token).welcome).rejects.toBeDefined();

    const deleted = await api(h, "DELETE", `/interns/${intern.id}`, { key: mk, body: { acknowledge_workspace_loss: false } });
    expect(deleted.status).toBe(202);
    expect(deleted.json).toEqual({ deleting: true });
    expect((await api(h, "GET", `/interns/${intern.id}`, { key: mk })).status).toBe(404);
    const actions = (await api(h, "GET", `/audit?target_id=${intern.id}&limit=100`, { key: mk })).json.data.map((e: any) => e.action);
    expect(actions.sort()).toEqual(
      ["intern.create", "intern.suspend", "intern.provision", "intern.host_token.rotate", "intern.host_token.revoke", "intern.delete"].sort(),
    );
  });

  it("keeps the programme gate, requires a management key, hides other workspaces' interns and checks input", async () => {
    const intern = (await api(h, "POST", "/interns", { key: mk, body: { name: "gatekeeper" } })).json;
    const paths: Array<[string, string, unknown?]> = [
      ["GET", "/interns"],
      ["POST", "/interns", { name: "abc" }],
      ["GET", `/interns/${intern.id}`],
      ["PATCH", `/interns/${intern.id}`, { description: "x" }],
      ["DELETE", `/interns/${intern.id}`],
      ["POST", `/interns/${intern.id}/suspend`],
      ["POST", `/interns/${intern.id}/provision`],
      ["POST", `/interns/${intern.id}/host-token`],
      ["DELETE", `/interns/${intern.id}/host-token`],
    ];
    for (const [method, path, body] of paths) {
      const outside = await api(h, method, path, { key: outsider.managementKey, ...(body ? { body } : {}) });
      expect(outside.status, `${method} ${path}`).toBe(404);
      const ordinary = await api(h, method, path, { key: h.tenant.apiKey, ...(body ? { body } : {}) });
      expect(ordinary.status, `${method} ${path}`).toBe(403);
    }
    // Another workspace of the same organization: its management key sees none of this workspace's interns.
    const ws = (await api(h, "POST", "/workspaces", { key: mk, body: { name: "Elsewhere" } })).json.data;
    const otherKey = (await api(h, "POST", "/keys", { key: mk, body: { name: "elsewhere", workspace_id: ws.id, is_management_key: true } })).json.key;
    const hidden = await api(h, "GET", `/interns/${intern.id}`, { key: otherKey });
    const missing = await api(h, "GET", "/interns/00000000-0000-4000-8000-000000000000", { key: otherKey });
    expect(hidden.status).toBe(404);
    expect(hidden.json).toEqual(missing.json);
    expect((await api(h, "GET", "/interns", { key: otherKey })).json.data).toEqual([]);

    for (const [body, field] of [
      [{ name: "A" }, "name"],
      [{ name: "x" }, "name"],
      [{ name: "much-too-long-name-here" }, "name"],
      [{ name: "ok-name", model: "no-slash" }, "model"],
      [{ name: "ok-name", vault_id: "v" }, "vault_id"],
      [{ name: "ok-name", workspace_id: ws.id }, "workspace_id"],
      [{ name: "gatekeeper" }, ""],
    ] as const) {
      const res = await api(h, "POST", "/interns", { key: mk, body });
      expect(res.status, JSON.stringify(body)).toBe(field === "" ? 409 : 400);
      if (field) expect(res.json.error.metadata.field).toBe(field);
    }
    expect((await api(h, "POST", `/interns/${intern.id}/suspend`, { key: mk, body: { now: true } })).status).toBe(400);
    expect((await api(h, "GET", "/interns?limit=0", { key: mk })).status).toBe(400);
    expect((await api(h, "GET", "/interns?starting_after=bogus", { key: mk })).status).toBe(400);
  });

  it("pages newest first with a cursor", async () => {
    for (const name of ["page-a", "page-b", "page-c"]) await api(h, "POST", "/interns", { key: mk, body: { name } });
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const res = await api(h, "GET", `/interns?limit=2${cursor ? `&starting_after=${cursor}` : ""}`, { key: mk });
      seen.push(...res.json.data.map((i: any) => i.name));
      if (!res.json.has_more) break;
      cursor = res.json.next_cursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.indexOf("page-c")).toBeLessThan(seen.indexOf("page-a"));
  });

  it("offers the same operations over gRPC", async () => {
    const created = await unary(adminGrpc, "CreateIntern", { name: "grpc-intern" }, bearer(mk));
    expect(created.error).toBeUndefined();
    expect(created.response.host_token).toMatch(/^pht-v1-/);
    const id = created.response.intern.id;
    const upd = await unary(adminGrpc, "UpdateIntern", { id, description: "d", update_mask: { paths: ["description"] } }, bearer(mk));
    expect(upd.response.intern.description).toBe("d");
    expect((await unary(adminGrpc, "GetIntern", { id }, bearer(h.tenant.apiKey))).error?.code).toBe(7);
    expect((await unary(adminGrpc, "GetIntern", { id }, bearer(outsider.managementKey))).error?.code).toBe(5);
    const token = await unary(adminGrpc, "IssueHostToken", { id }, bearer(mk));
    expect(token.response.host_token).toMatch(/^pht-v1-/);
    expect((await unary(adminGrpc, "DeleteIntern", { id }, bearer(mk))).response.deleting).toBe(true);
  });
});
