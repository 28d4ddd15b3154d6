/**
 * Sealed escalation (manual mode): an allow answer to a shell permission request lets only the
 * command that tool call named run outside the sandbox, only while that tool call is open, only in
 * the session's working folder, and (allow_once) only once. Any other terminal stays sandboxed.
 */
import { resolve, sep } from "node:path";

interface Grant {
  toolCallId: string;
  command: string;
  always: boolean;
}

const SHELLS = new Set(["sh", "bash", "zsh", "dash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/bin/zsh", "/usr/bin/zsh", "/bin/dash"]);

function normalise(s: string): string {
  return s.trim().replace(/\s+/g, " ");
}

/** The command a tool call names in its raw input (`command` or `cmd`, a string or an argv array). */
export function commandOfToolCall(rawInput: unknown): string | undefined {
  if (!rawInput || typeof rawInput !== "object") return undefined;
  const r = rawInput as { command?: unknown; cmd?: unknown };
  const c = r.command ?? r.cmd;
  if (typeof c === "string") return normalise(c) || undefined;
  if (Array.isArray(c) && c.length > 0 && c.every((x) => typeof x === "string")) return normalise(c.join(" ")) || undefined;
  return undefined;
}

/** The command lines a terminal/create request runs: the whole argv, and the script of `sh -c script`. */
export function terminalCommandLines(command: string, args: readonly string[]): string[] {
  const lines = [normalise([command, ...args].join(" "))];
  if (SHELLS.has(command) && args.length === 2 && /^-l?c$/.test(args[0]!)) lines.push(normalise(args[1]!));
  return lines;
}

function inside(root: string, dir: string): boolean {
  const r = resolve(root);
  const d = resolve(r, dir);
  return d === r || d.startsWith(r + sep);
}

export class EscalationLedger {
  private grants: Grant[] = [];

  /** Records an allow answer; false (nothing granted) when the tool call named no command. */
  grant(toolCallId: string, rawInput: unknown, always: boolean): boolean {
    const command = commandOfToolCall(rawInput);
    if (!command) return false;
    this.grants = this.grants.filter((g) => g.toolCallId !== toolCallId);
    this.grants.push({ toolCallId, command, always });
    return true;
  }

  /** The tool call completed or failed: its allow_once grant ends (allow_always lasts the run). */
  toolCallEnded(toolCallId: string): void {
    this.grants = this.grants.filter((g) => g.always || g.toolCallId !== toolCallId);
  }

  /**
   * True when this terminal may run unsandboxed: its command line is the one an open approved tool
   * call named and its folder is the session's (or inside it). An allow_once grant is used up.
   */
  consume(req: { command: string; args?: readonly string[] | undefined; cwd?: string | null | undefined }, sessionCwd: string): boolean {
    if (req.cwd && !inside(sessionCwd, req.cwd)) return false;
    const lines = terminalCommandLines(req.command, req.args ?? []);
    for (let i = this.grants.length - 1; i >= 0; i--) {
      const g = this.grants[i]!;
      if (!lines.includes(g.command)) continue;
      if (!g.always) this.grants.splice(i, 1);
      return true;
    }
    return false;
  }

  clear(): void {
    this.grants = [];
  }

  get size(): number {
    return this.grants.length;
  }
}
