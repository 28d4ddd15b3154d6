/**
 * File access confinement for the ACP client fs methods: a path the agent names must resolve
 * (symlinks followed) inside the session's working folder, unless the caller says access is
 * unconfined (self-drive as the host's own user without a process sandbox).
 */
import { closeSync, constants as fsConstants, fchownSync, lstatSync, mkdirSync, openSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import type * as acp from "@agentclientprotocol/sdk";
import { acpRuntime } from "./acp-runtime.js";

export interface Confinement {
  /** The session's working folder (must exist). */
  root: string;
  /** True when access is not confined to the folder. */
  unconfined: boolean;
}

export function outsideWorkingFolder(): acp.RequestError {
  return acpRuntime().RequestError.internalError({ reason: "outside_working_folder" }, "file access outside the session's working folder is not allowed");
}

function existsNoFollow(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** The real path to use for `path`, or an ACP error when it is relative or leaves the folder. */
export function confinePath(c: Confinement, path: string): string {
  if (!path.startsWith("/")) throw acpRuntime().RequestError.invalidParams({ path }, "path must be absolute");
  const abs = resolve(path);
  if (c.unconfined) return abs;
  const root = realpathSync(c.root);
  let probe = abs;
  let real: string | undefined;
  while (real === undefined) {
    try {
      real = join(realpathSync(probe), abs.slice(probe.length));
    } catch {
      // A name that exists but does not resolve (a dangling symlink) could point anywhere: writing
      // through it would create a file outside the folder.
      if (existsNoFollow(probe)) throw outsideWorkingFolder();
      const up = dirname(probe);
      if (up === probe) break;
      probe = up;
    }
  }
  const target = real ?? abs;
  if (target !== root && !target.startsWith(root + sep)) throw outsideWorkingFolder();
  return target;
}

export function readConfinedText(c: Confinement, params: acp.ReadTextFileRequest): acp.ReadTextFileResponse {
  const p = confinePath(c, params.path);
  let content: string;
  try {
    content = readFileSync(p, "utf8");
  } catch {
    throw acpRuntime().RequestError.resourceNotFound(params.path);
  }
  if (params.line || params.limit) {
    const lines = content.split("\n");
    const start = Math.max(0, (params.line ?? 1) - 1);
    const end = params.limit ? start + params.limit : lines.length;
    content = lines.slice(start, end).join("\n");
  }
  return { content };
}

export function writeConfinedText(c: Confinement, params: acp.WriteTextFileRequest, owner: { uid: number; gid: number } | undefined): void {
  const p = confinePath(c, params.path);
  mkdirSync(dirname(p), { recursive: true });
  // O_NOFOLLOW: a symlink planted after the check is not followed (the host may run as root).
  const fd = openSync(p, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW, 0o644);
  try {
    writeFileSync(fd, params.content);
    if (owner) fchownSync(fd, owner.uid, owner.gid);
  } finally {
    closeSync(fd);
  }
}
