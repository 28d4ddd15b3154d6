import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { LightAbortController } from "../../../src/lib/light-abort.js";

describe("LightAbortController", () => {
  it("is not Node's own controller on this Node (the dependants key was found)", () => {
    expect(LightAbortController).not.toBe(AbortController);
  });

  it("has a signal that is an AbortSignal, not aborted until abort()", () => {
    const ac = new LightAbortController();
    expect(ac.signal).toBeInstanceOf(AbortSignal);
    expect(ac.signal).toBeInstanceOf(EventTarget);
    expect(ac.signal.aborted).toBe(false);
    expect(ac.signal.reason).toBeUndefined();
    expect(() => ac.signal.throwIfAborted()).not.toThrow();
  });

  it("aborts once with the reason given, dispatching one abort event to listeners and onabort", () => {
    const ac = new LightAbortController();
    const seen: string[] = [];
    const listener = (e: Event) => seen.push(`listener ${e.type} ${String(ac.signal.aborted)}`);
    ac.signal.addEventListener("abort", listener);
    ac.signal.addEventListener("abort", () => seen.push("once"), { once: true });
    ac.signal.onabort = () => seen.push("onabort");
    const reason = new Error("gone");
    ac.abort(reason);
    ac.abort(new Error("second"));
    expect(seen).toEqual(["listener abort true", "once", "onabort"]);
    expect(ac.signal.aborted).toBe(true);
    expect(ac.signal.reason).toBe(reason);
    expect(() => ac.signal.throwIfAborted()).toThrow(reason);
  });

  it("defaults the reason to a DOMException named AbortError, as Node's controller does", () => {
    const ac = new LightAbortController();
    ac.abort();
    expect(ac.signal.reason).toBeInstanceOf(DOMException);
    expect((ac.signal.reason as DOMException).name).toBe("AbortError");
  });

  it("calls no listener that was removed", () => {
    const ac = new LightAbortController();
    let called = 0;
    const listener = () => called++;
    ac.signal.addEventListener("abort", listener);
    ac.signal.removeEventListener("abort", listener);
    ac.abort();
    expect(called).toBe(0);
  });

  it("aborts the signals AbortSignal.any made of it, before and after they were made", () => {
    const ac = new LightAbortController();
    const other = new AbortController();
    const both = AbortSignal.any([ac.signal, other.signal]);
    const reason = new Error("caller left");
    ac.abort(reason);
    expect(both.aborted).toBe(true);
    expect(both.reason).toBe(reason);
    expect(AbortSignal.any([ac.signal]).reason).toBe(reason);
    // A composite of composites reaches the light source too.
    const later = new LightAbortController();
    const nested = AbortSignal.any([AbortSignal.any([later.signal])]);
    later.abort("stop");
    expect(nested.reason).toBe("stop");
  });

  it("is accepted by Node's APIs that take a signal", async () => {
    const ac = new LightAbortController();
    const waiting = sleep(60_000, undefined, { signal: ac.signal });
    const target = new EventTarget();
    const event = once(target, "never", { signal: ac.signal });
    ac.abort(new Error("stopped"));
    await expect(waiting).rejects.toMatchObject({ name: "AbortError" });
    await expect(event).rejects.toMatchObject({ name: "AbortError" });
  });
});
