/**
 * The process groups this process started (agents, terminal commands), so that an exit, forced or
 * not, can take them along. Process groups are a process-wide resource, hence one registry per process.
 */
const groups = new Set<number>();

/** Records a child started with `detached: true` (its pid is its process-group id). */
export function trackProcessGroup(pid: number | undefined): void {
  if (pid === undefined || pid <= 0) return;
  liveProcessGroups(); // forget groups that have emptied, so a reused id is never mistaken for ours
  groups.add(pid);
}

export function untrackProcessGroup(pid: number | undefined): void {
  if (pid !== undefined) groups.delete(pid);
}

/** Number of tracked groups still alive. */
export function liveProcessGroups(): number {
  let n = 0;
  for (const pid of groups) {
    try {
      process.kill(-pid, 0);
      n++;
    } catch {
      groups.delete(pid);
    }
  }
  return n;
}

/** SIGKILLs every tracked group (synchronous system calls only; safe on any exit path). */
export function killTrackedProcessGroups(): number {
  let killed = 0;
  for (const pid of groups) {
    try {
      process.kill(-pid, "SIGKILL");
      killed++;
    } catch {
      // already gone
    }
  }
  groups.clear();
  return killed;
}

/** The tracked process-group ids (for a watchdog started at shutdown). */
export function trackedProcessGroups(): number[] {
  return [...groups];
}
