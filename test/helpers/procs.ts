/** The processes below a pid (Linux /proc), for tests that check what a command started. */
import { readFileSync, readdirSync } from "node:fs";

export interface ProcInfo {
  pid: number;
  ppid: number;
  comm: string;
  cmdline: string;
}

export function allProcesses(): ProcInfo[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .flatMap((n) => {
      try {
        const stat = readFileSync(`/proc/${n}/stat`, "utf8");
        const close = stat.lastIndexOf(")");
        return [{
          pid: Number(n),
          ppid: Number(stat.slice(close + 2).split(" ")[1]),
          comm: stat.slice(stat.indexOf("(") + 1, close),
          cmdline: readFileSync(`/proc/${n}/cmdline`, "utf8").replace(/\0/g, " ").trim(),
        }];
      } catch {
        return []; // ended while we looked
      }
    });
}

/** `rootPid` and every process below it. */
export function processTree(rootPid: number): ProcInfo[] {
  const all = allProcesses();
  const found: ProcInfo[] = [];
  const queue = [rootPid];
  while (queue.length) {
    const pid = queue.shift()!;
    for (const p of all) {
      if (p.pid === pid) found.push(p);
      if (p.ppid === pid) queue.push(p.pid);
    }
  }
  return found;
}
