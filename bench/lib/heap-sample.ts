/**
 * `--heap-sample <dir>` of the in-process benches (split-hop.ts, tracing-cost.ts): a sampling heap profile of this
 * process over the measured rounds, objects already collected included (what was allocated, not what stayed),
 * every `--heap-sample-interval` bytes (default 1024). (bench/lib/heap-sampler.mjs does the same for a server
 * process, preloaded.)
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { resolve } from "node:path";
import { flag, num } from "./args.js";

export interface HeapSampling {
  /** Stops sampling and writes the profile as `<dir>/<name>.heapprofile`; returns that path. */
  stop(name: string): Promise<string>;
}

/** Starts sampling when `--heap-sample <dir>` was given; undefined otherwise. */
export async function startHeapSampling(): Promise<HeapSampling | undefined> {
  const dir = flag("heap-sample");
  if (dir === undefined) return undefined;
  const session = new Session();
  const post = (method: string, params?: object) => new Promise<unknown>((ok, fail) => session.post(method, params, (err, res) => (err ? fail(err) : ok(res))));
  session.connect();
  await post("HeapProfiler.startSampling", { samplingInterval: num("heap-sample-interval", 1024), includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  return {
    async stop(name) {
      const { profile } = (await post("HeapProfiler.stopSampling")) as { profile: unknown };
      session.disconnect();
      mkdirSync(dir, { recursive: true });
      const file = resolve(dir, `${name}.heapprofile`);
      writeFileSync(file, JSON.stringify(profile));
      return file;
    },
  };
}
