/**
 * The process groups this process started (agents, terminal commands), so that an exit, forced or
 * not, can take them along. Process groups are a process-wide resource, hence one registry per process.
 *
 * The groups belong to this process's lifetime by construction, not only by bookkeeping on its exit
 * paths: the first tracked group starts a guard, a tiny detached `/bin/sh` that reads the tracked ids
 * from a pipe whose only writer is this process. However this process ends (a signal, `process.exit`
 * from any module, Node's cluster worker leaving on its primary's disconnect, SIGKILL, a crash), the
 * kernel closes that pipe; the guard reads end of file and SIGKILLs every group still tracked, at once.
 * An `exit` hook does the same synchronously for the ordinary exit paths.
 */
import { spawn } from "node:child_process";
import type { Writable } from "node:stream";

const groups = new Set<number>();

/**
 * The guard: `+<pgid>` tracks a group, `-<pgid>` forgets it (it emptied; its id may be reused), end of
 * input kills every group still tracked. It ignores terminal and termination signals (it is in a session
 * of its own, and a stray SIGTERM must not leave the groups unguarded); it exits at end of input only.
 */
const GUARD_SCRIPT = [
  "trap '' HUP INT TERM PIPE",
  "g=' '",
  "while IFS= read -r l; do",
  "  p=${l#?}",
  "  case $p in ''|*[!0-9]*) continue;; esac",
  "  case $l in",
  '    +*) g="$g$p ";;',
  '    -*) case $g in *" $p "*) g="${g%%" $p "*} ${g#*" $p "}";; esac;;',
  "  esac",
  "done",
  'for p in $g; do kill -s KILL -- "-$p" 2>/dev/null; done',
].join("\n");

/** The guard's input, once started; null when it could not be started (the exit hook still applies). */
let guard: Writable | null | undefined;
let guardPid: number | undefined;

function guardInput(): Writable | null {
  if (guard !== undefined) return guard;
  guard = null;
  try {
    const child = spawn("/bin/sh", ["-c", GUARD_SCRIPT], { detached: true, stdio: ["pipe", "ignore", "ignore"], env: {} });
    child.on("error", () => {
      guard = null;
    });
    const input = child.stdin;
    guardPid = child.pid;
    if (input) {
      input.on("error", () => {
        guard = null;
      });
      // Neither the guard nor its pipe keeps this process alive.
      (input as Writable & { unref?: () => void }).unref?.();
      guard = input;
    }
    child.unref();
  } catch {
    guard = null;
  }
  process.once("exit", () => {
    killTrackedProcessGroups();
  });
  return guard;
}

/** One line to the guard (a pipe write of a few bytes: libuv writes it at once). */
function tell(line: string): void {
  const input = guardInput();
  if (!input || input.destroyed) return;
  try {
    input.write(`${line}\n`);
  } catch {
    // the guard is gone; the exit hook still applies
  }
}

function forget(pid: number): void {
  if (groups.delete(pid)) tell(`-${pid}`);
}

/** Records a child started with `detached: true` (its pid is its process-group id). */
export function trackProcessGroup(pid: number | undefined): void {
  if (pid === undefined || pid <= 0) return;
  liveProcessGroups(); // forget groups that have emptied, so a reused id is never mistaken for ours
  if (groups.has(pid)) return;
  groups.add(pid);
  tell(`+${pid}`);
}

export function untrackProcessGroup(pid: number | undefined): void {
  if (pid !== undefined) forget(pid);
}

/** Number of tracked groups still alive. */
export function liveProcessGroups(): number {
  let n = 0;
  for (const pid of [...groups]) {
    try {
      process.kill(-pid, 0);
      n++;
    } catch {
      forget(pid);
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
  for (const pid of [...groups]) forget(pid);
  return killed;
}

/** The tracked process-group ids (for a watchdog started at shutdown). */
export function trackedProcessGroups(): number[] {
  return [...groups];
}

/** Process id of the guard (tests), or undefined when none runs. */
export function processGroupGuardPid(): number | undefined {
  return guard ? guardPid : undefined;
}
