/**
 * Runs a benchmark module again in a worker thread (its own event loop, so load generation does not
 * compete with the server under test for one loop). The worker needs the TypeScript loader too:
 * bin/run-ts.mjs registers it in the main thread only.
 */
import { Worker } from "node:worker_threads";

export function runInWorker<T>(moduleUrl: string, data: unknown, onEdge?: (edge: "start" | "end") => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const boot = `import { register } from ${JSON.stringify(import.meta.resolve("tsx/esm/api"))}; register(); await import(${JSON.stringify(moduleUrl)});`;
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData: data });
    // `{ edge }` messages (the measured window opening and closing, from closedLoop's onWindow) go to onEdge; the
    // first other message is the result.
    const onMessage = (msg: unknown) => {
      const edge = (msg as { edge?: unknown } | null)?.edge;
      if (onEdge && (edge === "start" || edge === "end")) return onEdge(edge);
      worker.off("message", onMessage);
      resolve(msg as T);
    };
    worker.on("message", onMessage);
    worker.once("error", reject);
    worker.once("exit", (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)));
  });
}

/**
 * Starts a benchmark module in a worker thread that stays up (a fake upstream, say): resolves with its first
 * message; `stop()` posts "stop" and waits for the worker to exit.
 */
export async function startWorker<T>(moduleUrl: string, data: unknown): Promise<{ ready: T; stop(): Promise<void> }> {
  const boot = `import { register } from ${JSON.stringify(import.meta.resolve("tsx/esm/api"))}; register(); await import(${JSON.stringify(moduleUrl)});`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData: data });
  const ready = await new Promise<T>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  return {
    ready,
    stop: () =>
      new Promise<void>((resolve) => {
        worker.once("exit", () => resolve());
        worker.postMessage("stop");
      }),
  };
}

/**
 * A worker thread that stays up and runs jobs one at a time (one load generator, warmed once, for every
 * measured window of a run): the module, loaded with `workerData` `{ jobs: true }`, answers each posted job
 * with one message. `run(job)` posts it and resolves with that message; `stop()` terminates the worker.
 */
export function startJobWorker<J, R>(moduleUrl: string): { run(job: J): Promise<R>; stop(): Promise<void> } {
  const boot = `import { register } from ${JSON.stringify(import.meta.resolve("tsx/esm/api"))}; register(); await import(${JSON.stringify(moduleUrl)});`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData: { jobs: true } });
  let failed: Error | undefined;
  let pending: ((err: Error) => void) | undefined;
  const fail = (err: Error) => {
    failed ??= err;
    pending?.(err);
  };
  worker.on("error", fail);
  worker.on("exit", (code) => fail(new Error(`load worker exited with ${code}`)));
  return {
    run: (job) =>
      new Promise<R>((resolve, reject) => {
        if (failed) return reject(failed);
        pending = reject;
        worker.once("message", (msg: R) => {
          pending = undefined;
          resolve(msg);
        });
        worker.postMessage(job);
      }),
    stop: async () => {
      worker.removeAllListeners("exit");
      await worker.terminate();
    },
  };
}
