/**
 * Bubblewrap: finding it and building the command lines that confine a shell command (no network,
 * read-only root, private /tmp, only the working folder writable) or a whole agent process.
 */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

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
  for (const dir of new Set(opts.writable)) args.push("--bind", dir, dir);
  args.push("--chdir", opts.cwd, "--unshare-pid", "--die-with-parent", "--", ...opts.argv);
  return args;
}
