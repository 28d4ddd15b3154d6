/**
 * The bench's stand-in intern host, as its own process: dials the core's InternLinkService over gRPC
 * and plays a scripted agent that stamps each content chunk with its emit time ("<seq>|<ms>|pad").
 * Prompts: "burst N SIZE", "paced N EVERY_MS", "ask". Prints "ready" once attached; on each stdin
 * line "cpu" it prints its cumulative process.cpuUsage() as JSON.
 */
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { startFakeHost } from "../test/integration/interns/fake-host.js";

function arg(name: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : "";
}
const now = () => performance.timeOrigin + performance.now();

const host = startFakeHost({
  coreUrl: arg("core"),
  token: arg("token"),
  onStart: (run, h) => {
    const id = run.start.runId;
    const [cmd, nArg, sizeArg] = run.start.prompt.split(/\s+/);
    const n = Number(nArg ?? "1");
    const filler = "x".repeat(Math.max(0, Number(sizeArg ?? "16") - 20));
    const end = () => {
      h.emit(id, { case: "usage", value: { promptTokens: 1n, completionTokens: BigInt(n), totalTokens: BigInt(n + 1) } as never });
      h.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
      run.ended = true;
    };
    h.emit(id, { case: "started", value: {} as never });
    if (cmd === "ask") {
      run.pendingQuestion = { id: crypto.randomUUID(), options: ["allow_once", "reject_once"] };
      h.emit(id, { case: "question", value: { interactionId: run.pendingQuestion.id, kind: "permission", operation: "shell", options: ["allow_once", "reject_once"] } as never });
      return true;
    }
    h.emit(id, { case: "model", value: { model: "bench/agent" } as never });
    if (cmd === "paced") {
      let i = 0;
      const t = setInterval(() => {
        h.emit(id, { case: "content", value: { text: `${i}|${now()}|` } as never });
        if (++i >= n) {
          clearInterval(t);
          end();
        }
      }, Number(sizeArg ?? "2"));
      return true;
    }
    let i = 0;
    const step = () => {
      const stop = Math.min(n, i + 64);
      for (; i < stop; i++) h.emit(id, { case: "content", value: { text: `${i}|${now()}|${filler}` } as never });
      if (i < n) setImmediate(step);
      else end();
    };
    step();
    return true;
  },
});
await host.welcome;
process.stdout.write("ready\n");
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "cpu") process.stdout.write(JSON.stringify(process.cpuUsage()) + "\n");
  if (line.trim() === "quit") {
    host.kill();
    process.exit(0);
  }
});
