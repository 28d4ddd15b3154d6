/**
 * A link's silence, as its liveness check should measure it: the time this process could have heard
 * the peer and did not. A periodic check that runs late (the process was stopped, starved of CPU on a
 * loaded machine, or its event loop was blocked) must not count the time it was not listening: Node
 * runs due timers before it reads the sockets, so whatever the peer sent meanwhile is still unread when
 * the late check runs, and a link that was healthy would be dropped as silent.
 */
export interface SilenceWatch {
  /** Something arrived from the peer. */
  heard(): void;
  /**
   * Called by the periodic check (every `tickMs`): the silence so far, in milliseconds. When this
   * call comes more than half a tick late, the lateness is not counted as the peer's silence.
   */
  check(): number;
}

export function createSilenceWatch(tickMs: number, now: () => number = Date.now): SilenceWatch {
  let lastHeard = now();
  let lastCheck = lastHeard;
  return {
    heard() {
      lastHeard = now();
    },
    check() {
      const t = now();
      const late = t - lastCheck - tickMs;
      lastCheck = t;
      if (late > tickMs / 2) lastHeard = Math.min(t, lastHeard + late);
      return t - lastHeard;
    },
  };
}
