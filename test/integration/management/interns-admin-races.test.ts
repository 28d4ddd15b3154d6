/**
 * Concurrent management writes on one intern answer what the state says (2xx, 404 once the intern is
 * gone, 409 on a conflicting state), never 500: redundant DELETEs, and DELETE racing suspend,
 * provision, host-token issue/revoke and PATCH, over HTTP and gRPC, on SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";

const INTERNS = 12;
const OK_OR_STATE = new Set([200, 201, 202, 204, 404, 409]);
const GRPC_OK_OR_STATE = new Set([grpc.status.OK, grpc.status.NOT_FOUND, grpc.status.FAILED_PRECONDITION, grpc.status.ABORTED]);

describe.each(["sqlite", "postgresql"] as const)("concurrent intern management writes (%s)", (provider) => {
  let h: Harness;
  let mk: string;
  let adminGrpc: any;

  beforeAll(async () => {
    h = await startHarness({ provider, env: { PORTICO_INTERN_RATE_LIMIT: "10000" } });
    mk = h.tenant.managementKey;
    adminGrpc = grpcClient("portico/internadmin/v1/internadmin_service.proto", "portico.internadmin.v1.InternAdminService", h.coreUrl);
  });
  afterAll(async () => {
    adminGrpc?.close();
    await h?.close();
  });

  const createInterns = (prefix: string) =>
    Promise.all(
      Array.from({ length: INTERNS }, async (_, i) => {
        const res = await api(h, "POST", "/interns", { key: mk, body: { name: `${prefix}${i}`, provision: false } });
        expect(res.status).toBe(201);
        return res.json.id as string;
      }),
    );

  it("redundant DELETEs: one succeeds, the others answer 404 (HTTP and gRPC)", async () => {
    const ids = await createInterns("dup");
    const http: number[] = [];
    const rpc: number[] = [];
    await Promise.all(
      ids.flatMap((id) => [
        ...Array.from({ length: 3 }, async () => http.push((await api(h, "DELETE", `/interns/${id}`, { key: mk })).status)),
        ...Array.from({ length: 3 }, async () => rpc.push((await unary(adminGrpc, "DeleteIntern", { id }, bearer(mk))).error?.code ?? grpc.status.OK)),
      ]),
    );
    expect(http.filter((s) => s !== 202 && s !== 404)).toEqual([]);
    expect(rpc.filter((c) => c !== grpc.status.OK && c !== grpc.status.NOT_FOUND)).toEqual([]);
    expect(http.filter((s) => s === 202).length + rpc.filter((c) => c === grpc.status.OK).length).toBe(INTERNS);
    expect(await h.database.db.intern.count({ where: { id: { in: ids } } })).toBe(0);
  });

  it("DELETE racing suspend, provision, host-token issue/revoke and PATCH never answers 500 (HTTP and gRPC)", async () => {
    const ids = await createInterns("mix");
    const http: string[] = [];
    const rpc: string[] = [];
    const call = async (label: string, p: Promise<{ status: number }>) => {
      const s = (await p).status;
      if (!OK_OR_STATE.has(s)) http.push(`${label} ${s}`);
    };
    const rcall = async (label: string, p: Promise<{ error?: grpc.ServiceError }>) => {
      const c = (await p).error?.code ?? grpc.status.OK;
      if (!GRPC_OK_OR_STATE.has(c)) rpc.push(`${label} ${c}`);
    };
    await Promise.all(
      ids.flatMap((id, i) => [
        call("delete", api(h, "DELETE", `/interns/${id}`, { key: mk })),
        call("suspend", api(h, "POST", `/interns/${id}/suspend`, { key: mk, body: {} })),
        call("provision", api(h, "POST", `/interns/${id}/provision`, { key: mk, body: {} })),
        call("issue", api(h, "POST", `/interns/${id}/host-token`, { key: mk, body: {} })),
        call("revoke", api(h, "DELETE", `/interns/${id}/host-token`, { key: mk })),
        call("patch", api(h, "PATCH", `/interns/${id}`, { key: mk, body: { description: `d${i}` } })),
        rcall("delete", unary(adminGrpc, "DeleteIntern", { id }, bearer(mk))),
        rcall("suspend", unary(adminGrpc, "SuspendIntern", { id }, bearer(mk))),
        rcall("issue", unary(adminGrpc, "IssueHostToken", { id }, bearer(mk))),
        rcall("revoke", unary(adminGrpc, "RevokeHostToken", { id }, bearer(mk))),
        rcall("patch", unary(adminGrpc, "UpdateIntern", { id, description: `g${i}` }, bearer(mk))),
      ]),
    );
    expect(http).toEqual([]);
    expect(rpc).toEqual([]);
    expect(await h.database.db.intern.count({ where: { id: { in: ids } } })).toBe(0);
    const unexpected = h.logs.filter((l) => l.includes("unexpected error in core handler"));
    expect(unexpected).toEqual([]);
  });
});
