/**
 * The README's "Your first real completion" recipes run as written: the fenced blocks are taken from
 * README.md, the start line is run with bash (`npm start` with the local server declared, pointed at a fake
 * OpenAI-compatible server started here instead of Ollama's address), and the curl blocks are run with bash
 * against that real service (its address put in place of 127.0.0.1:8080), with the keys the service printed
 * on its first start. So is the curl walkthrough up to the intern part (whose session ids come from a live
 * stream), with the keys put in place of its placeholders, and each of its comments describes the call below
 * it. A second start on the same data folder prints the console's address again and no keys;
 * `GET /` leads to the console; `portico --help` says `serve` forks workers. The README's shell blocks carry
 * only characters a shell and a header can carry outside their comments.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPortico } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

const REPO = resolve(import.meta.dirname, "../../..");
const README = readFileSync(join(REPO, "README.md"), "utf8");
const README_ORIGIN = "http://127.0.0.1:8080";
const OLLAMA_URL = "http://127.0.0.1:11434/v1";

/** The fenced bash block right after `<!-- first-completion:<name> -->` (or `<!-- <name> -->` with a full name). */
function recipe(name: string): string {
  const marker = name === "walkthrough" ? "<!-- walkthrough -->\n" : `<!-- first-completion:${name} -->\n`;
  const at = README.indexOf(marker);
  if (at < 0) throw new Error(`README.md has no ${marker.trim()}`);
  const m = /^```bash\n([\s\S]*?)\n```/.exec(README.slice(at + marker.length));
  if (!m) throw new Error(`no fenced bash block after ${marker.trim()}`);
  return m[1]!;
}

/** Values written one after the other, as `curl -s` prints several bodies with no separator. */
function jsonValues(text: string): any[] {
  const out: any[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") {
      if (depth++ === 0) start = i;
    } else if (c === "}" || c === "]") {
      if (--depth === 0) out.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return out;
}

function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    const child = spawn("bash", ["-c", script], { cwd: REPO, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", rej);
    child.on("close", (code) => res({ code, stdout, stderr }));
  });
}

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Runs a start line with bash in its own process group; resolves once `ready(output)` holds. */
function startService(line: string, env: Record<string, string>, ready: (out: string) => boolean): Promise<Started> {
  return new Promise((res, rej) => {
    const child = spawn("bash", ["-c", line], { cwd: REPO, detached: true, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let done = false;
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    const started: Started = { child, output: () => out, exited };
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      stop(started);
      rej(new Error(`not ready in 90 s:\n${out}`));
    }, 90_000);
    const check = () => {
      if (!done && ready(out)) {
        done = true;
        clearTimeout(timer);
        res(started);
      }
    };
    child.stdout!.on("data", (d) => ((out += d), check()));
    child.stderr!.on("data", (d) => ((out += d), check()));
    child.on("exit", (code) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      rej(new Error(`exited ${code} before ready:\n${out}`));
    });
  });
}

/** Whether any process of the group is still there. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * SIGTERM to the group this test started (bash, npm, portico and its workers); waits until every process of
 * it is gone (SIGKILL to the group if it is still there after the graceful-stop bound).
 */
async function stop(s: Started | undefined): Promise<void> {
  const pgid = s?.child.pid;
  if (!pgid || !groupAlive(pgid)) return;
  process.kill(-pgid, "SIGTERM");
  await s.exited;
  await waitFor(`process group ${pgid} gone after SIGTERM`, () => !groupAlive(pgid), { timeoutMs: 15_000, intervalMs: 50 }).catch(() => {
    if (groupAlive(pgid)) process.kill(-pgid, "SIGKILL");
  });
}

const banner = (out: string, label: string) => new RegExp(`${label}:\\s+(\\S+)`).exec(out)?.[1];

describe("README: your first real completion, as written", () => {
  let openai: FakeUpstream;
  let ollama: FakeUpstream;
  let dataDir: string;
  let service: Started | undefined;
  let env: Record<string, string>;
  let keys: { MK: string; API_KEY: string };
  let origin: string;
  const run = (block: string, extra: Record<string, string> = {}) => bash(block.replaceAll(README_ORIGIN, origin), { ...keys, ...extra });

  beforeAll(async () => {
    [openai, ollama] = await Promise.all([startFakeOpenAI(), startFakeOpenAI()]);
    dataDir = mkdtempSync(join(tmpdir(), "portico-readme-"));
    // Only what a test must change: a fresh data folder, free ports, and OpenAI's address (the BYOK recipe's
    // provider) pointed at a fake; everything else is `npm start`'s default.
    env = {
      PORTICO_DATA_DIR: dataDir,
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_PROVIDER_OPENAI_BASE_URL: `${openai.url}/v1`,
    };
    const start = recipe("local-start");
    expect(start).toContain(OLLAMA_URL);
    service = await startService(start.replaceAll(OLLAMA_URL, `${ollama.url}/v1`), env, (out) => banner(out, "web console") !== undefined);
    const out = service.output();
    keys = { MK: banner(out, "management key")!, API_KEY: banner(out, "api key")! };
    expect(keys.MK).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    expect(keys.API_KEY).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    origin = banner(out, "API base URL")!.replace(/\/api\/v1$/, "");
    expect(banner(out, "web console")).toBe(`${origin}/console/`);
  }, 120_000);
  afterAll(async () => {
    await stop(service);
    await Promise.all([openai?.close(), ollama?.close()]);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("with a provider key through BYOK: stored (never echoed), then a completion served with it", async () => {
    const block = recipe("byok");
    expect(block).toContain(README_ORIGIN);
    const providerKey = `sk-proj-${randomBytes(24).toString("hex")}`;
    const from = openai.requests.length;
    const res = await run(block, { OPENAI_API_KEY: providerKey });
    expect(res.code, res.stderr).toBe(0);
    const [stored, completion, ...rest] = jsonValues(res.stdout);
    expect(rest).toEqual([]);
    expect(stored.data).toMatchObject({ provider: "openai", name: "mine" });
    expect(res.stdout).not.toContain(providerKey);
    expect(completion.provider).toBe("openai");
    expect(completion.choices[0].message.content).toBe("Hello, world");
    const upstream = openai.requests.slice(from);
    expect(upstream).toHaveLength(1);
    expect(upstream[0]!.headers.authorization).toBe(`Bearer ${providerKey}`);
    expect(upstream[0]!.body.model).toBe("gpt-4o-mini");
  });

  it("with a local OpenAI-compatible server: listed in /models, served with no key", async () => {
    const from = ollama.requests.length;
    const res = await run(recipe("local"));
    expect(res.code, res.stderr).toBe(0);
    const [models, completion, ...rest] = jsonValues(res.stdout);
    expect(rest).toEqual([]);
    expect(models.data.map((m: { id: string }) => m.id)).toContain("ollama/*");
    expect(completion.provider).toBe("ollama");
    expect(completion.choices[0].message.content).toBe("Hello, world");
    const upstream = ollama.requests.slice(from);
    expect(upstream).toHaveLength(1);
    expect(upstream[0]!.headers.authorization).toBeUndefined();
    expect(upstream[0]!.body.model).toBe("llama3.2");
  });

  it("the walkthrough runs as written up to the intern, and each comment describes the call below it", async () => {
    const block = recipe("walkthrough");
    const upToIntern = block.slice(0, block.indexOf("# Talk to the built-in intern"));
    expect(upToIntern.length).toBeGreaterThan(500);
    // Each comment line describes the next command: a chat completion is POST /chat/completions, a preset
    // (or a version of one) is created with POST /presets/{slug}/chat/completions.
    const lines = upToIntern.split("\n");
    for (const [i, line] of lines.entries()) {
      if (!line.startsWith("#")) continue;
      const command = lines.slice(i + 1).find((l) => l.startsWith("curl")) ?? "";
      const comment = line.toLowerCase();
      if (/^# (a )?chat completion/.test(comment)) expect(command, line).toMatch(/\$BASE\/chat\/completions /);
      if (/^# (create )?a preset|new version/.test(comment)) expect(command, line).toMatch(/\$BASE\/presets\/[^/]+\/chat\/completions /);
      if (/provider key/.test(comment)) expect(command, line).toMatch(/\$BASE\/byok /);
    }
    const script = upToIntern
      .replace("'paste the management key npm start printed'", keys.MK)
      .replace("'paste the api key npm start printed'", keys.API_KEY);
    const providerKey = `sk-proj-${randomBytes(24).toString("hex")}`;
    const res = await run(script, { MK: "", API_KEY: "", OPENAI_API_KEY: providerKey });
    expect(res.code, res.stderr).toBe(0);
    const answers = jsonValues(res.stdout);
    for (const a of answers) expect(a.error, JSON.stringify(a)).toBeUndefined();
    const designated = answers.find((a) => a.data?.slug === "support-bot" && a.data?.designated_version?.version === 2);
    expect(designated, res.stdout).toBeDefined();
    expect(answers.find((a) => a.data?.provider === "openai" && a.data?.name === "prod")).toBeDefined();
    const completion = answers.at(-1);
    expect(completion.object).toBe("chat.completion");
    expect(completion.provider).toBe("openai");
    expect(completion.choices[0].message.content).toBe("Hello, world");
    const upstream = openai.requests.at(-1)!;
    // Served with a stored OpenAI key (the BYOK recipe's, stored first, or the walkthrough's).
    expect(upstream.headers.authorization).toMatch(/^Bearer sk-proj-[0-9a-f]{48}$/);
    expect(upstream.body.messages[0]).toEqual({ role: "system", content: "Answer in one sentence." });
  });

  it("GET / leads to the console; a restart prints the console's address again and no keys", async () => {
    const root = await fetch(`${origin}/`, { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/console/");
    await stop(service);
    service = await startService("npm start", env, (out) => banner(out, "web console") !== undefined);
    const out = service.output();
    expect(out).toMatch(/web console:\s+http:\/\/127\.0\.0\.1:\d+\/console\//);
    expect(out).not.toMatch(/management key:|api key:/);
    expect(out).not.toMatch(/pk-v1-[0-9a-f]{64}/);
    const again = banner(out, "API base URL")!;
    expect((await fetch(`${again}/key`, { headers: { authorization: `Bearer ${keys.MK}` } })).status).toBe(200);
  }, 120_000);

  it("portico --help says serve forks worker processes", async () => {
    const res = await runPortico(["--help"], {});
    expect(res.code).toBe(0);
    const text = res.stdout.replace(/\s+/g, " ");
    expect(text).toContain("serve run core and gateway (and the embedded intern host): a primary process forks one worker process per CPU");
    expect(text).not.toMatch(/serve [^]*?in one process/);
  });

  it("the README's shell blocks carry only characters a shell and a header can carry (comments aside)", () => {
    const blocks = [...README.matchAll(/^```bash\n([\s\S]*?)\n```/gm)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThan(4);
    for (const block of blocks) {
      for (const line of block.split("\n")) {
        const code = line.replace(/(^|\s)#.*$/, "");
        expect(code, line).toMatch(/^[\x20-\x7e]*$/);
      }
    }
  });
});
