/**
 * Bubblewrap: finding it and building the command lines that confine a shell command (no network,
 * read-only root, private /tmp, only the working folder writable) or a whole agent process.
 */
import { accessSync, constants, realpathSync } from "node:fs";
import { delimiter, join, sep } from "node:path";

/** Finds an executable on PATH; undefined when absent. */
export function findOnPath(name: string, path = process.env.PATH ?? ""): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** Resolves the bwrap setting: explicit path, null (disabled), or a PATH lookup. */
export function resolveBwrap(setting: string | null | undefined): string | undefined {
  if (setting === null) return undefined;
  if (setting) return setting;
  return findOnPath("bwrap");
}

/**
 * What a missing bubblewrap changes for an agent profile, for the host's start-up log (null: nothing).
 * Only two things need it: in manual mode, a command an agent runs through a client terminal without asking
 * first (it would run sandboxed; without bwrap it is refused), and a profile with `sandbox: "process"` (its
 * agent cannot start). Approved commands and self-drive runs never use it, and the built-in agent asks before
 * every command, so it works as usual.
 */
export function bwrapMissingNotice(profile: { sandbox?: "terminal" | "process" | "none"; offerTerminal?: boolean }): { level: "info" | "warn"; message: string } | null {
  const sandbox = profile.sandbox ?? "terminal";
  if (sandbox === "none") return null;
  if (sandbox === "process") {
    return {
      level: "warn",
      message:
        'bubblewrap (bwrap) not found: this agent profile runs the agent in a process sandbox (sandbox "process"), so its sessions cannot start; install bubblewrap (apt-get install -y bubblewrap) or change the profile',
    };
  }
  if (profile.offerTerminal === false) return null;
  return {
    level: "info",
    message:
      "bubblewrap (bwrap) not found: in manual mode, a shell command an agent runs without asking first is refused instead of run sandboxed. " +
      "Commands allowed in manual mode and all self-drive commands run as usual, and the built-in agent (which asks before every command) is not affected. " +
      "Install bubblewrap (apt-get install -y bubblewrap) to sandbox unasked commands instead",
  };
}

/**
 * Arguments for bwrap running one command: read-only root, fresh /dev, /proc and /tmp, the working
 * folder bound writable, no network, own pid namespace, dies with the host, new session (no TTY
 * injection).
 */
export function bwrapCommandArgs(opts: { cwd: string; writable: string[]; argv: string[] }): string[] {
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
  for (const dir of new Set([...opts.writable])) args.push("--bind", dir, dir);
  args.push("--chdir", opts.cwd, "--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--", ...opts.argv);
  return args;
}

/**
 * Arguments for bwrap around a whole agent process: like a command, but the network stays (the
 * agent needs its model API) and HOME is writable too.
 */
export function bwrapAgentArgs(opts: { cwd: string; writable: string[]; argv: string[] }): string[] {
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
  // The private /tmp would hide an agent installed under /tmp (MODULE_NOT_FOUND): keep it readable.
  for (const dir of agentInstallDirsUnderTmp(opts.argv)) args.push("--ro-bind", dir, dir);
  for (const dir of new Set(opts.writable)) args.push("--bind", dir, dir);
  args.push("--chdir", opts.cwd, "--unshare-pid", "--die-with-parent", "--", ...opts.argv);
  return args;
}

/**
 * Folders under /tmp the agent's own files live in (its executable and absolute-path arguments,
 * symlinks resolved), as the first folder below /tmp: the private /tmp of the process sandbox must
 * not hide them.
 */
export function agentInstallDirsUnderTmp(argv: readonly string[]): string[] {
  const dirs = new Set<string>();
  const [command, ...rest] = argv;
  const candidates = [command && !command.includes("/") ? findOnPath(command) : command, ...rest.filter((a) => a.startsWith("/"))];
  for (const c of candidates) {
    if (!c) continue;
    for (const p of new Set([c, safeRealpath(c)])) {
      if (!p || !p.startsWith(`/tmp${sep}`)) continue;
      const top = p.split(sep).slice(0, 3).join(sep);
      if (top.length > "/tmp/".length) dirs.add(top);
    }
  }
  return [...dirs];
}

function safeRealpath(p: string): string | undefined {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
}
