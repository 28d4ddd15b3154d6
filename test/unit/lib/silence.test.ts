/**
 * The liveness checks' silence (src/lib/silence.ts): a peer's silence grows with this process's time,
 * but a check that runs late (the process was stopped or starved) does not count its own stall.
 */
import { describe, expect, it } from "vitest";
import { createSilenceWatch } from "../../../src/lib/silence.js";

describe("createSilenceWatch", () => {
  it("counts the time since the peer was last heard while the checks run on time", () => {
    let t = 1_000;
    const w = createSilenceWatch(100, () => t);
    for (let i = 1; i <= 5; i++) {
      t += 100;
      expect(w.check()).toBe(100 * i);
    }
    w.heard();
    t += 100;
    expect(w.check()).toBe(100);
  });

  it("tolerates ordinary timer jitter without crediting it", () => {
    let t = 0;
    const w = createSilenceWatch(100, () => t);
    t += 140; // 40 ms late: less than half a tick
    expect(w.check()).toBe(140);
  });

  it("does not count a stall of this process as the peer's silence", () => {
    let t = 0;
    const w = createSilenceWatch(100, () => t);
    t += 100;
    expect(w.check()).toBe(100);
    t += 900; // the check comes 800 ms late: the process was not running
    expect(w.check()).toBe(200);
    t += 100;
    expect(w.check()).toBe(300);
    // A peer that stays silent is still noticed, in this process's awake time.
    for (let i = 0; i < 10; i++) {
      t += 100;
      w.check();
    }
    expect(w.check()).toBeGreaterThan(1_000);
  });
});
