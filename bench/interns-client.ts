/**
 * Load client for bench/interns-stream.ts, run as a separate process so its CPU is not counted as
 * ours. Opens `--streams` concurrent intern chat streams (keep-alive undici pool), parses SSE with
 * eventsource-parser, and checks every stream for lost, duplicated or reordered chunks. Content
 * chunks carry "<seq>|<emit time ms>" stamped by the bench host; latency = arrival − emit time.
 * Prints one JSON line with the results.
 */
import { performance } from "node:perf_hooks";
import { Agent, request, type IncomingMessage } from "node:http";
import { createParser } from "eventsource-parser";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
}

const base = arg("base", "");
const internId = arg("intern", "");
const key = arg("key", "");
const prompt = arg("prompt", "burst 10 16");
const streams = Number(arg("streams", "1"));
const repeat = Number(arg("repeat", "1"));
const mode = arg("mode", "manual");
const agent = new Agent({ keepAlive: true, maxSockets: Math.max(streams, 1) });
const now = () => performance.timeOrigin + performance.now();

interface StreamStats {
  chunks: number;
  lost: number;
  dup: number;
  reordered: number;
  latencies: number[];
  firstLatency: number | undefined;
  ttfbFromRequest: number | undefined;
  status: number;
  done: boolean;
  sessionId: string | null;
}

async function one(): Promise<StreamStats> {
  const st: StreamStats = { chunks: 0, lost: 0, dup: 0, reordered: 0, latencies: [], firstLatency: undefined, ttfbFromRequest: undefined, status: 0, done: false, sessionId: null };
  const sent = now();
  const body = JSON.stringify({ stream: true, approval_mode: mode, messages: [{ role: "user", content: prompt }] });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${base}/api/v1/interns/${internId}/chat/completions`, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "content-length": Buffer.byteLength(body) },
    });
    req.on("response", resolve);
    req.on("error", reject);
    req.end(body);
  });
  st.status = res.statusCode ?? 0;
  let expected = 0;
  const seen = new Set<number>();
  const parser = createParser({
    onEvent(ev) {
      const t = now();
      if (ev.data === "[DONE]") {
        st.done = true;
        return;
      }
      const chunk = JSON.parse(ev.data);
      if (chunk.session_id) st.sessionId = chunk.session_id;
      const text: string | undefined = chunk.choices?.[0]?.delta?.content;
      if (text === undefined) return;
      const bar = text.indexOf("|");
      const seq = Number(text.slice(0, bar));
      const emitted = Number(text.slice(bar + 1, text.indexOf("|", bar + 1)));
      if (st.firstLatency === undefined) {
        st.firstLatency = t - emitted;
        st.ttfbFromRequest = t - sent;
      }
      st.latencies.push(t - emitted);
      st.chunks++;
      if (seen.has(seq)) st.dup++;
      else if (seq !== expected) st.reordered++;
      seen.add(seq);
      expected = seq + 1;
    },
  });
  const decoder = new TextDecoder();
  for await (const buf of res) parser.feed(decoder.decode(buf as Buffer, { stream: true }));
  const want = Number(prompt.split(/\s+/)[1] ?? "0");
  if (prompt.startsWith("burst") || prompt.startsWith("paced")) st.lost = Math.max(0, want - seen.size);
  return st;
}

async function main(): Promise<void> {
  const all: StreamStats[] = [];
  const t0 = now();
  for (let r = 0; r < repeat; r++) {
    const batch = await Promise.all(Array.from({ length: streams }, () => one()));
    all.push(...batch);
  }
  const seconds = (now() - t0) / 1000;
  const lat = all.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const first = all.map((s) => s.firstLatency).filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  const ttfb = all.map((s) => s.ttfbFromRequest).filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  const pct = (a: number[], p: number) => (a.length ? a[Math.min(a.length - 1, Math.floor((p / 100) * a.length))]! : NaN);
  const chunks = all.reduce((n, s) => n + s.chunks, 0);
  process.stdout.write(
    JSON.stringify({
      streams: all.length,
      non200: all.filter((s) => s.status !== 200).length,
      notDone: all.filter((s) => !s.done).length,
      chunks,
      lost: all.reduce((n, s) => n + s.lost, 0),
      dup: all.reduce((n, s) => n + s.dup, 0),
      reordered: all.reduce((n, s) => n + s.reordered, 0),
      seconds,
      chunksPerSecond: chunks / seconds,
      chunkLatencyMs: { p50: pct(lat, 50), p99: pct(lat, 99) },
      firstChunkAddedMs: { p50: pct(first, 50), p99: pct(first, 99) },
      firstChunkFromRequestMs: { p50: pct(ttfb, 50), p99: pct(ttfb, 99) },
      sessionIds: mode === "manual" && prompt === "ask" ? all.map((s) => s.sessionId) : undefined,
    }) + "\n",
  );
  agent.destroy();
}

await main();
