/**
 * The one paging rule of every list (docs/api.md#pagination): each list pages by cursor through every
 * item that existed when paging began, exactly once, while new items are inserted between and during
 * the page requests; `offset` still works for existing clients; bad paging parameters are 400 naming
 * the parameter over HTTP and INVALID_ARGUMENT naming it over gRPC (SQLite and PostgreSQL).
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuditService } from "../../../src/gen/portico/audit/v1/audit_service_pb.js";
import { ByokService } from "../../../src/gen/portico/byok/v1/byok_service_pb.js";
import { GenerationsService } from "../../../src/gen/portico/generations/v1/generations_service_pb.js";
import { InternAdminService } from "../../../src/gen/portico/internadmin/v1/internadmin_service_pb.js";
import { KeysService } from "../../../src/gen/portico/keys/v1/keys_service_pb.js";
import { PresetsService } from "../../../src/gen/portico/presets/v1/presets_service_pb.js";
import { WorkspacesService } from "../../../src/gen/portico/workspaces/v1/workspaces_service_pb.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";

interface ListCase {
  name: string;
  /** The list's path (without paging parameters; may carry a filter). */
  path: string;
  /** Adds one item to the list; `n` makes it unique. */
  add(n: number): Promise<unknown>;
  /** The item's identity in the list. */
  id(item: any): string;
}

const PAGE = 3;
const BEFORE = 8;

describe.each(["sqlite", "postgresql"] as const)("one paging rule for every list (%s)", (provider) => {
  let h: Harness;
  let mk: string;
  let workspaceId: string;
  let counter = 0;
  const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;

  beforeAll(async () => {
    h = await startHarness({ provider });
    mk = h.tenant.managementKey;
    const ws = await api(h, "POST", "/workspaces", { key: mk, body: { name: "paging members" } });
    expect(ws.status).toBe(201);
    workspaceId = ws.json.data.id;
  });
  afterAll(() => h?.close());

  const created = async (res: Promise<{ status: number; text: string }>, status: number) => {
    const r = await res;
    expect(r.status, r.text).toBe(status);
    return r;
  };

  const cases = (): ListCase[] => [
    {
      name: "keys",
      path: "/keys",
      add: (n) => created(api(h, "POST", "/keys", { key: mk, body: { name: `paging key ${n}` } }), 201),
      id: (k) => k.hash,
    },
    {
      name: "workspaces",
      path: "/workspaces",
      add: (n) => created(api(h, "POST", "/workspaces", { key: mk, body: { name: `paging ws ${n}`, slug: `paging-${unique()}` } }), 201),
      id: (w) => w.id,
    },
    {
      name: "workspace members",
      path: `/workspaces/${workspaceId}/members`,
      add: () => created(api(h, "POST", `/workspaces/${workspaceId}/members/add`, { key: mk, body: { emails: [`m${unique()}@example.com`] } }), 200),
      id: (m) => m.user_id,
    },
    {
      name: "audit log",
      path: "/audit?action=workspace.update",
      add: (n) => created(api(h, "PATCH", `/workspaces/${workspaceId}`, { key: mk, body: { description: `change ${n}` } }), 200),
      id: (e) => e.id,
    },
    {
      name: "audit log by action prefix",
      path: "/audit?action_prefix=workspace.upd",
      add: (n) => created(api(h, "PATCH", `/workspaces/${workspaceId}`, { key: mk, body: { description: `prefixed ${n}` } }), 200),
      id: (e) => e.id,
    },
    {
      name: "presets",
      path: "/presets",
      add: () => created(api(h, "POST", `/presets/paging-${unique()}/chat/completions`, { key: mk, body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] } }), 200),
      id: (p) => p.id,
    },
    {
      name: "preset versions",
      path: "/presets/paged-versions/versions",
      add: (n) =>
        created(api(h, "POST", "/presets/paged-versions/chat/completions", { key: mk, body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], temperature: (n % 20) / 10 } }), 200),
      id: (v) => v.id,
    },
    {
      name: "byok credentials",
      path: "/byok?provider=openai",
      add: (n) => created(api(h, "POST", "/byok", { key: mk, body: { provider: "openai", key: `sk-paging-${n}-${unique()}`, name: `paging ${n}` } }), 200),
      id: (c) => c.id,
    },
    {
      // A refused chat request is recorded too (status error): a generation without an upstream.
      name: "generations",
      path: "/generations?status=error",
      add: (n) => created(api(h, "POST", "/chat/completions", { key: mk, body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: `hi ${n}` }], temperature: 5 } }), 400),
      id: (g) => g.id,
    },
    {
      name: "interns",
      path: "/interns",
      add: () => created(api(h, "POST", "/interns", { key: mk, body: { name: `p${unique()}`.slice(0, 17) } }), 201),
      id: (i) => i.id,
    },
  ];

  /** Every item of the list, read page by page with one uncursored read: the ground truth. */
  async function all(path: string): Promise<string[]> {
    const sep = path.includes("?") ? "&" : "?";
    const res = await api(h, "GET", `${path}${sep}limit=100`, { key: mk });
    expect(res.status, res.text).toBe(200);
    expect(res.json.has_more).toBe(false);
    return res.json.data;
  }

  it.each(["keys", "workspaces", "workspace members", "audit log", "audit log by action prefix", "presets", "preset versions", "byok credentials", "generations", "interns"])(
    "%s: a cursor walk sees every item that existed exactly once while items are inserted",
    async (name) => {
      const c = cases().find((x) => x.name === name)!;
      const sep = c.path.includes("?") ? "&" : "?";
      for (let n = 0; n < BEFORE; n++) await c.add(n);
      const existing = (await all(c.path)).map(c.id);
      expect(existing.length).toBeGreaterThanOrEqual(BEFORE);

      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      let n = 1000;
      for (;;) {
        // One insert races the page read, another lands between pages.
        const [page] = await Promise.all([
          api(h, "GET", `${c.path}${sep}limit=${PAGE}${cursor ? `&starting_after=${encodeURIComponent(cursor)}` : ""}`, { key: mk }),
          c.add(n++),
        ]);
        expect(page.status, page.text).toBe(200);
        expect(page.json.data.length).toBeLessThanOrEqual(PAGE);
        seen.push(...page.json.data.map(c.id));
        pages++;
        if (!page.json.has_more) {
          expect(page.json.next_cursor).toBeUndefined();
          break;
        }
        expect(page.json.data).toHaveLength(PAGE);
        cursor = page.json.next_cursor;
        expect(typeof cursor).toBe("string");
        await c.add(n++);
        expect(pages).toBeLessThan(100);
      }
      expect(new Set(seen).size, "no item twice").toBe(seen.length);
      for (const id of existing) expect(seen, `item ${id} seen`).toContain(id);
    },
  );

  it("offset still pages for existing clients, and a page answered by offset carries the cursor to continue", async () => {
    const everything = (await all("/keys")).map((k: any) => k.hash);
    const byOffset = await api(h, "GET", "/keys?offset=1&limit=2", { key: mk });
    expect(byOffset.status).toBe(200);
    expect(byOffset.json.data.map((k: any) => k.hash)).toEqual(everything.slice(1, 3));
    expect(byOffset.json.total_count).toBe(everything.length);
    expect(byOffset.json.has_more).toBe(everything.length > 3);
    const next = await api(h, "GET", `/keys?limit=2&starting_after=${byOffset.json.next_cursor}`, { key: mk });
    expect(next.json.data.map((k: any) => k.hash)).toEqual(everything.slice(3, 5));
    // A legacy intern cursor (the bare id of the last intern of a page) is still honoured.
    const interns = (await all("/interns")).map((i: any) => i.id);
    const legacy = await api(h, "GET", `/interns?limit=2&starting_after=${interns[0]}`, { key: mk });
    expect(legacy.json.data.map((i: any) => i.id)).toEqual(interns.slice(1, 3));
  });

  it.each([
    ["limit=0", "limit", "limit must be an integer between 1 and 100, got 0"],
    ["limit=101", "limit", "limit must be an integer between 1 and 100, got 101"],
    ["limit=abc", "limit", "limit must be an integer between 1 and 100, got a string"],
    ["offset=-1", "offset", "offset must be an integer between 0 and 2147483647, got -1"],
    ["starting_after=bogus", "starting_after", "starting_after must be the next_cursor of a previous page of this list"],
    [`starting_after=${"x".repeat(513)}`, "starting_after", "starting_after must be at most 512 characters long"],
    ["offset=2&starting_after=CURSOR", "offset", "offset cannot be combined with starting_after: page with starting_after alone"],
  ])("every list answers %s with 400 naming %s, with the same message", async (query, field, message) => {
    for (const c of cases()) {
      const first = await api(h, "GET", `${c.path}${c.path.includes("?") ? "&" : "?"}limit=1`, { key: mk });
      const cursor = first.json.next_cursor ?? "";
      const res = await api(h, "GET", `${c.path}${c.path.includes("?") ? "&" : "?"}${query.replace("CURSOR", cursor)}`, { key: mk });
      expect(res.status, `${c.name} ${query}`).toBe(400);
      expect(res.json.error.message, c.name).toBe(message);
      expect(res.json.error.metadata.field, c.name).toBe(field);
    }
  });

  it("a cursor of one list is refused by another", async () => {
    const keys = await api(h, "GET", "/keys?limit=1", { key: mk });
    const res = await api(h, "GET", `/workspaces?starting_after=${keys.json.next_cursor}`, { key: mk });
    expect(res.status).toBe(400);
    expect(res.json.error.metadata.field).toBe("starting_after");
  });

  it("gRPC: every list pages by cursor and refuses bad paging fields with INVALID_ARGUMENT naming them", async () => {
    const transport = createGrpcTransport({ baseUrl: h.coreUrl });
    const headers = { authorization: `Bearer ${mk}` };
    const lists: Array<[string, (page: { limit?: number; offset?: number; startingAfter?: string }) => Promise<{ hasMore: boolean; nextCursor?: string; n: number }>]> = [
      ["ListKeys", async (p) => ((r) => ({ ...r, n: r.keys.length }))(await createClient(KeysService, transport).listKeys(p, { headers }))],
      ["ListWorkspaces", async (p) => ((r) => ({ ...r, n: r.workspaces.length }))(await createClient(WorkspacesService, transport).listWorkspaces(p, { headers }))],
      [
        "ListWorkspaceMembers",
        async (p) => ((r) => ({ ...r, n: r.members.length }))(await createClient(WorkspacesService, transport).listWorkspaceMembers({ ...p, workspaceId }, { headers })),
      ],
      ["ListAuditEvents", async (p) => ((r) => ({ ...r, n: r.events.length }))(await createClient(AuditService, transport).listAuditEvents(p, { headers }))],
      ["ListPresets", async (p) => ((r) => ({ ...r, n: r.presets.length }))(await createClient(PresetsService, transport).listPresets(p, { headers }))],
      [
        "ListPresetVersions",
        async (p) => ((r) => ({ ...r, n: r.versions.length }))(await createClient(PresetsService, transport).listPresetVersions({ ...p, slug: "paged-versions" }, { headers })),
      ],
      ["ListByokCredentials", async (p) => ((r) => ({ ...r, n: r.credentials.length }))(await createClient(ByokService, transport).listByokCredentials(p, { headers }))],
      ["ListGenerations", async (p) => ((r) => ({ ...r, n: r.generations.length }))(await createClient(GenerationsService, transport).listGenerations(p, { headers }))],
      ["ListInterns", async (p) => ((r) => ({ ...r, n: r.interns.length }))(await createClient(InternAdminService, transport).listInterns(p, { headers }))],
    ];
    const refusal = async (call: Promise<unknown>) => {
      const err = await call.then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err).toBeDefined();
      return { code: err!.code, field: errorDetailOf(err!)?.field, message: err!.rawMessage };
    };
    for (const [name, list] of lists) {
      const first = await list({ limit: 1 });
      expect(first.n, name).toBe(1);
      expect(first.hasMore, name).toBe(true);
      const second = await list({ limit: 1, startingAfter: first.nextCursor! });
      expect(second.n, name).toBe(1);
      // proto3: 0 is "unset", the default page.
      expect((await list({})).n, name).toBeGreaterThan(1);
      expect(await refusal(list({ limit: 101 })), name).toEqual({
        code: Code.InvalidArgument,
        field: "limit",
        message: "limit must be an integer between 1 and 100, got 101",
      });
      expect(await refusal(list({ offset: -1 })), name).toMatchObject({ code: Code.InvalidArgument, field: "offset" });
      expect(await refusal(list({ startingAfter: randomUUID().replace(/-/g, "") })), name).toMatchObject({ code: Code.InvalidArgument, field: "starting_after" });
      expect(await refusal(list({ offset: 1, startingAfter: first.nextCursor! })), name).toMatchObject({ code: Code.InvalidArgument, field: "offset" });
    }
  });
});
