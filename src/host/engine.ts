/**
 * The host engine: sessions (one agent process each), runs (one ACP prompt turn each), questions,
 * cancellation, sandboxed terminals and the bounded per-run event queues the link drains. It knows
 * nothing about the transport: the link calls startRun/answer/cancelRun and pulls events.
 */
import {
  chmodSync,
  chownSync,
  closeSync,
  constants as fsConstants,
  fchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createHash, randomUUID } from "node:crypto";
import { basename, dirname, join, resolve, sep } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import {
  AnswerOutcome,
  ApprovalMode,
  CancelReason,
  RunEventSchema,
  type HeldRun,
  type RunEvent,
  type StartRun,
} from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { spawnAgentProcess, type AgentChannel, type AgentLauncher } from "./agent-process.js";
import {
  clip,
  isOptionKind,
  modelFromSessionState,
  offeredKinds,
  operationForToolKind,
  optionIdForKind,
  repairIncomingMessage,
  selfDriveOptionId,
  usageFromTurn,
  usdCost,
  type OfferedOption,
  type OptionKind,
} from "./mapping.js";
import type { AgentProfile, InternHostLimits } from "./options.js";
import { createTerminalManager, type TerminalManager } from "./terminals.js";

type RunEventInit = MessageInitShape<typeof RunEventSchema>;
type EventInit = NonNullable<RunEventInit["event"]>;

/** Why a run is being cancelled (host-internal). */
type CancelCause = "client" | "deadline" | "caller" | "operator" | "duration" | "link" | "failed";

export interface EngineOptions {
  profile: AgentProfile;
  workRoot: string;
  limits: InternHostLimits;
  logger: Logger;
  runAs: { uid: number; gid: number } | undefined;
  bwrap: string | undefined;
  launcher?: AgentLauncher | undefined;
  hostVersion: string;
  /** Called when events become available to the link. */
  onReadable: () => void;
  /** Called when running/paused counts change. */
  onCapacity: () => void;
}

interface PendingQuestion {
  id: string;
  options: OfferedOption[];
  kinds: OptionKind[];
  operation: string | undefined;
  settle: (outcome: acp.RequestPermissionOutcome) => void;
  timer?: NodeJS.Timeout | undefined;
}

interface Run {
  id: string;
  session: SessionEntry;
  mode: "self-drive" | "manual";
  state: "starting" | "streaming" | "cancelling" | "done";
  nextSeq: bigint;
  lastWrittenSeq: bigint;
  queue: Array<{ event: RunEvent; bytes: number }>;
  queuedBytes: number;
  terminalEmitted: boolean;
  /** Link broke while streaming (or the core dropped the run): nothing more is sent. */
  detached: boolean;
  /** Paused when the link broke: kept for a grace period and announced in Hello. */
  held: boolean;
  heldTimer?: NodeJS.Timeout | undefined;
  presented: PendingQuestion | undefined;
  waiting: PendingQuestion[];
  cancelCause: CancelCause | undefined;
  cancelTimer?: NodeJS.Timeout | undefined;
  durationTimer?: NodeJS.Timeout | undefined;
  interactionDeadlineMs: number;
  escalation: { once: boolean; always: boolean };
  costAtStart: number | undefined;
  model: string | undefined;
}

interface AgentInstance {
  channel: AgentChannel;
  conn: acp.ClientConnection;
  acpSessionId: string;
  init: acp.InitializeResponse;
  toolKinds: Map<string, string>;
  currentModeId: string | undefined;
  availableModes: Set<string>;
  model: string | undefined;
  lastCost: number | undefined;
  terminals: TerminalManager;
  dead: boolean;
  suppressUpdates: boolean;
  exitInfo: string | undefined;
}

interface SessionEntry {
  key: string;
  cwd: string;
  agent: AgentInstance | undefined;
  starting: Promise<AgentInstance> | undefined;
  previousAcpSessionId: string | undefined;
  run: Run | undefined;
  lastUsed: number;
}

/** Snapshot of a session for diagnostics and tests. */
export interface SessionInfo {
  sessionId: string;
  cwd: string;
  /** Agent process id (= its process group id); undefined when no agent runs or in-process. */
  agentPid: number | undefined;
  agentAlive: boolean;
  runId: string | undefined;
}

export interface HostEngine {
  startRun(msg: StartRun): void;
  answer(runId: string, interactionId: string, answer: string): AnswerOutcome;
  cancelRun(runId: string, reason: CancelReason): void;
  /** Next event for the link, round-robin across runs; undefined when none. */
  takeEvent(): RunEvent | undefined;
  /** The link broke: streaming runs are cancelled, paused runs held for the grace period. */
  linkDown(): void;
  /** Runs to announce in Hello after a reconnect. */
  heldRuns(): HeldRun[];
  /** Welcome arrived: held runs resume, except those the core cancels. */
  linkUp(cancelRunIds: readonly string[]): void;
  capacity(): { runningRuns: number; pausedRuns: number; busy: boolean };
  sessions(): SessionInfo[];
  agentName(): string;
  close(): Promise<void>;
}

const MINIMAL_ENV = ["PATH", "LANG", "LANGUAGE", "TZ", "TERM", "NODE_OPTIONS", "SHELL", "USER", "LOGNAME"];

/** A filesystem-safe folder name for a caller-visible session id. */
export function sessionFolderName(sessionId: string): string {
  if (/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/.test(sessionId)) return sessionId;
  return `h-${createHash("sha256").update(sessionId).digest("hex").slice(0, 32)}`;
}

function eventBytes(ev: EventInit): number {
  const v = ev.value as { text?: unknown; message?: unknown } | undefined;
  const text = typeof v?.text === "string" ? v.text : typeof v?.message === "string" ? v.message : "";
  return Buffer.byteLength(text) + 48;
}

function isTerminalCase(c: EventInit["case"]): boolean {
  return c === "rejected" || c === "turnEnded" || c === "turnFailed" || c === "runEnded";
}

export function createHostEngine(opts: EngineOptions): HostEngine {
  const { limits, logger, profile } = opts;
  const launcher = opts.launcher ?? spawnAgentProcess;
  const sessions = new Map<string, SessionEntry>();
  const runs = new Map<string, Run>();
  let rrCursor = 0;
  let closed = false;
  let linkIsUp = true;

  const homeDir = join(opts.workRoot, "home");

  const reaper = setInterval(reapIdleAgents, Math.max(250, Math.min(limits.idleAgentTtlMs / 2, 30_000)));
  reaper.unref();

  // ---------- folders and env ----------

  function ensureDir(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    if (opts.runAs) {
      chownSync(dir, opts.runAs.uid, opts.runAs.gid);
      // Parents must be traversable by the unprivileged user.
      let p = dirname(dir);
      const root = resolve(opts.workRoot);
      while (p.startsWith(root) && p.length >= root.length) {
        try {
          chmodSync(p, 0o755);
        } catch {
          // best effort
        }
        if (p === root) break;
        p = dirname(p);
      }
    }
  }

  /** With an unprivileged run-as user, every parent of the working folder must be traversable by it. */
  function checkReachable(dir: string): void {
    if (!opts.runAs) return;
    const { uid, gid } = opts.runAs;
    for (let p = dirname(dir); ; p = dirname(p)) {
      const st = statSync(p);
      const ok = st.uid === uid ? (st.mode & 0o100) !== 0 : st.gid === gid ? (st.mode & 0o010) !== 0 : (st.mode & 0o001) !== 0;
      if (!ok) {
        throw new Error(`the working folder is not reachable by uid ${uid}: make ${p} traversable (chmod o+x) or choose another work root`);
      }
      if (p === dirname(p)) break;
    }
  }

  function cwdFor(key: string): string {
    const strategy = profile.cwd ?? "session";
    if (strategy === "session") return join(opts.workRoot, "sessions", sessionFolderName(key));
    if (strategy === "intern") return join(opts.workRoot, "workspace");
    return strategy.fixed;
  }

  /** Portico's own connection settings (with credentials) never reach an agent, whatever the profile inherits. */
  const PORTICO_SECRET_ENV = new Set(["DATABASE_URL", "SHADOW_DATABASE_URL", "REDIS_URL"]);

  function agentEnv(cwd: string): Record<string, string> {
    const env: Record<string, string> = {};
    const inherit = profile.inheritEnv ?? "all";
    for (const [k, v] of Object.entries(process.env)) {
      if (v === undefined || k.startsWith("PORTICO_") || PORTICO_SECRET_ENV.has(k)) continue;
      if (inherit === "minimal" && !MINIMAL_ENV.includes(k) && !k.startsWith("LC_")) continue;
      env[k] = v;
    }
    env.HOME = homeDir;
    env.PWD = cwd;
    for (const [k, v] of Object.entries(profile.env ?? {})) env[k] = v;
    return env;
  }

  // ---------- events ----------

  function emit(run: Run, ev: EventInit): void {
    if (run.detached || run.terminalEmitted) return;
    const terminal = isTerminalCase(ev.case);
    const bytes = eventBytes(ev);
    if (!terminal && run.queuedBytes + bytes > limits.maxQueuedBytesPerRun) {
      logger.warn({ runId: run.id, queuedBytes: run.queuedBytes }, "run event queue overflow; failing the run");
      failRun(run, {
        code: 410,
        reason: "attachment_failed",
        message: "the run produced more output than the intern host retains",
        retryable: false,
      });
      return;
    }
    const event = create(RunEventSchema, { runId: run.id, seq: run.nextSeq, event: ev });
    run.nextSeq += 1n;
    run.queue.push({ event, bytes });
    run.queuedBytes += bytes;
    if (terminal) run.terminalEmitted = true;
    opts.onReadable();
  }

  function failRun(run: Run, f: { code: number; reason: string; message: string; retryable: boolean }): void {
    emit(run, { case: "turnFailed", value: f });
    if (run.state === "starting" || run.state === "streaming") cancel(run, "failed");
  }

  // ---------- capacity ----------

  function activeRuns(): Run[] {
    return [...runs.values()].filter((r) => r.state !== "done");
  }

  function pausedCount(): number {
    return activeRuns().filter((r) => r.presented !== undefined).length;
  }

  function capacity(): { runningRuns: number; pausedRuns: number; busy: boolean } {
    const running = activeRuns().length;
    const paused = pausedCount();
    return { runningRuns: running, pausedRuns: paused, busy: running >= limits.maxConcurrentRuns || paused >= limits.maxPausedRuns };
  }

  // ---------- agents ----------

  async function startAgent(session: SessionEntry, budget: AbortSignal): Promise<AgentInstance> {
    ensureDir(session.cwd);
    ensureDir(homeDir);
    checkReachable(session.cwd);
    checkReachable(homeDir);
    const env = agentEnv(session.cwd);
    const sandboxProcess = profile.sandbox === "process";
    if (sandboxProcess && !opts.bwrap) throw new Error("the agent profile asks for a process sandbox but bubblewrap (bwrap) is not installed");
    const channel = await launcher({
      command: profile.command,
      args: profile.args ?? [],
      env,
      cwd: session.cwd,
      runAs: opts.runAs,
      bwrap: sandboxProcess && opts.bwrap ? { path: opts.bwrap, writable: [session.cwd, homeDir] } : undefined,
    });
    const onBudget = (): void => void channel.dispose(0);
    budget.addEventListener("abort", onBudget, { once: true });
    try {
      const raw = acp.ndJsonStream(channel.output, channel.input, { maxMessageBytes: limits.maxAcpLineBytes });
      const tap = new TransformStream<acp.AnyMessage, acp.AnyMessage>({
        transform(msg, c) {
          if (repairIncomingMessage(msg)) logger.debug({ session: session.key }, "repaired a malformed usage_update from the agent");
          c.enqueue(msg);
        },
      });
      const stream = { writable: raw.writable, readable: raw.readable.pipeThrough(tap) };
      // eslint-disable-next-line prefer-const
      let agent: AgentInstance;
      const app = buildClientApp(session, () => agent);
      const conn = app.connect(stream);
      const partial: Partial<AgentInstance> = {
        channel,
        conn,
        toolKinds: new Map(),
        availableModes: new Set(),
        terminals: createTerminalManager({ maxOpen: limits.maxOpenTerminalsPerSession, maxOutputBytes: limits.maxTerminalOutputBytes }),
        dead: false,
        suppressUpdates: false,
      };
      agent = partial as AgentInstance;
      void channel.exited.then((exit) => {
        agent.dead = true;
        agent.exitInfo = exit.error ? `could not start (${exit.error})` : exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
        agent.terminals.disposeAll();
        conn.close(new Error("agent process exited"));
        if (session.agent === agent) session.agent = undefined;
        logger.debug({ session: session.key, exit, stderrTail: channel.stderrTail() }, "agent process ended");
      });
      const offerFs = profile.offerFs ?? true;
      const init = await conn.agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: offerFs, writeTextFile: offerFs }, terminal: profile.offerTerminal ?? true },
        clientInfo: { name: "portico-intern-host", version: opts.hostVersion },
      });
      if (init.protocolVersion !== acp.PROTOCOL_VERSION) {
        throw new Error(`the agent answered protocol version ${String(init.protocolVersion)}; this host speaks ${acp.PROTOCOL_VERSION}`);
      }
      agent.init = init;
      const caps = init.agentCapabilities ?? {};
      let state: { modes?: acp.SessionModeState | null; configOptions?: unknown; models?: unknown } | undefined;
      const prev = session.previousAcpSessionId;
      if (prev && caps.sessionCapabilities?.resume) {
        state = (await conn.agent.request(acp.methods.agent.session.resume, { sessionId: prev, cwd: session.cwd, mcpServers: [] })) as typeof state;
        agent.acpSessionId = prev;
      } else if (prev && caps.loadSession) {
        agent.acpSessionId = prev;
        agent.suppressUpdates = true;
        try {
          state = ((await conn.agent.request(acp.methods.agent.session.load, { sessionId: prev, cwd: session.cwd, mcpServers: [] })) ?? {}) as typeof state;
        } finally {
          agent.suppressUpdates = false;
        }
      } else {
        const res = await conn.agent.request(acp.methods.agent.session.new, { cwd: session.cwd, mcpServers: [] });
        agent.acpSessionId = res.sessionId;
        state = res as typeof state;
        if (prev) logger.info({ session: session.key }, "agent cannot resume sessions; started a new agent session");
      }
      if (state?.modes) {
        agent.currentModeId = state.modes.currentModeId;
        for (const m of state.modes.availableModes) agent.availableModes.add(m.id);
      }
      agent.model = modelFromSessionState(state ?? {});
      session.previousAcpSessionId = agent.acpSessionId;
      if (budget.aborted) throw new Error("agent start budget exceeded");
      return agent;
    } catch (err) {
      await channel.dispose(0);
      throw err;
    } finally {
      budget.removeEventListener("abort", onBudget);
    }
  }

  function agentFor(session: SessionEntry, acpSessionId: string): AgentInstance | undefined {
    const a = session.agent;
    return a && a.acpSessionId === acpSessionId ? a : undefined;
  }

  function buildClientApp(session: SessionEntry, agentRef: () => AgentInstance): acp.ClientApp {
    const app = acp.client({ name: "portico-intern-host" });
    app.onNotification(acp.methods.client.session.update, ({ params }) => onUpdate(session, agentRef(), params));
    app.onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => onPermission(session, agentRef(), params, signal));
    if (profile.offerTerminal ?? true) {
      const terms = (): TerminalManager => agentRef().terminals;
      app.onRequest(acp.methods.client.terminal.create, ({ params }) => createTerminal(session, agentRef(), params));
      app.onRequest(acp.methods.client.terminal.output, ({ params }) => terms().output(params.terminalId));
      app.onRequest(acp.methods.client.terminal.waitForExit, ({ params, signal }) => terms().waitForExit(params.terminalId, signal));
      app.onRequest(acp.methods.client.terminal.kill, ({ params }) => {
        terms().kill(params.terminalId);
        return {};
      });
      app.onRequest(acp.methods.client.terminal.release, ({ params }) => {
        terms().release(params.terminalId);
        return {};
      });
    }
    if (profile.offerFs ?? true) {
      app.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => readTextFile(session, params));
      app.onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
        writeTextFile(session, params);
        return {};
      });
    }
    return app;
  }

  // ---------- ACP handlers ----------

  function onUpdate(session: SessionEntry, agent: AgentInstance, params: acp.SessionNotification): void {
    if (agent.suppressUpdates || params.sessionId !== agent.acpSessionId) return;
    const u = params.update;
    const run = session.run && session.run.state !== "done" ? session.run : undefined;
    switch (u.sessionUpdate) {
      case "agent_message_chunk":
      case "agent_thought_chunk": {
        let text = "";
        if (u.content.type === "text") text = u.content.text;
        else if (u.content.type === "resource_link") text = `[${u.content.name}](${u.content.uri})`;
        if (!text || !run || run.state === "starting") return;
        emit(run, u.sessionUpdate === "agent_message_chunk" ? { case: "content", value: { text } } : { case: "reasoning", value: { text } });
        return;
      }
      case "tool_call":
      case "tool_call_update":
        if (u.kind) agent.toolKinds.set(u.toolCallId, u.kind);
        if (agent.toolKinds.size > 1000) {
          const first = agent.toolKinds.keys().next().value;
          if (first !== undefined) agent.toolKinds.delete(first);
        }
        return;
      case "current_mode_update":
        agent.currentModeId = u.currentModeId;
        return;
      case "config_option_update": {
        const model = modelFromSessionState({ configOptions: u.configOptions });
        if (model) {
          agent.model = model;
          if (run && run.state === "streaming") reportModel(run, model);
        }
        return;
      }
      case "usage_update": {
        const c = usdCost(u.cost);
        if (c !== undefined) agent.lastCost = c;
        return;
      }
      default:
        return;
    }
  }

  function reportModel(run: Run, model: string): void {
    if (run.model === model) return;
    run.model = model;
    emit(run, { case: "model", value: { model } });
  }

  function onPermission(
    session: SessionEntry,
    agent: AgentInstance,
    params: acp.RequestPermissionRequest,
    signal: AbortSignal,
  ): acp.RequestPermissionResponse | Promise<acp.RequestPermissionResponse> {
    const cancelled: acp.RequestPermissionResponse = { outcome: { outcome: "cancelled" } };
    const run = session.run;
    const tc = params.toolCall;
    if (tc.kind) agent.toolKinds.set(tc.toolCallId, tc.kind);
    const kind = tc.kind ?? agent.toolKinds.get(tc.toolCallId);
    if (!run || run.state !== "streaming" || params.sessionId !== agent.acpSessionId) return cancelled;
    const options: OfferedOption[] = params.options.map((o) => ({ optionId: o.optionId, kind: o.kind }));
    if (run.mode === "self-drive") {
      const id = selfDriveOptionId(options);
      logger.debug({ runId: run.id, kind }, "self-drive answered a permission request");
      return id ? { outcome: { outcome: "selected", optionId: id } } : cancelled;
    }
    return new Promise<acp.RequestPermissionResponse>((resolveAnswer) => {
      const q: PendingQuestion = {
        id: randomUUID(),
        options,
        kinds: offeredKinds(options),
        operation: operationForToolKind(kind),
        settle: (outcome) => {
          if (q.timer) clearTimeout(q.timer);
          signal.removeEventListener("abort", onAbort);
          resolveAnswer({ outcome });
        },
      };
      const onAbort = (): void => {
        if (run.presented === q) {
          run.presented = undefined;
          opts.onCapacity();
        }
        run.waiting = run.waiting.filter((w) => w !== q);
        q.settle({ outcome: "cancelled" });
      };
      signal.addEventListener("abort", onAbort, { once: true });
      if (run.presented) run.waiting.push(q);
      else present(run, q);
    });
  }

  function present(run: Run, q: PendingQuestion): void {
    if (pausedCount() >= limits.maxPausedRuns) {
      q.settle({ outcome: "cancelled" });
      failRun(run, { code: 503, reason: "busy", message: "the intern host holds as many paused runs as it can", retryable: true });
      return;
    }
    run.presented = q;
    const value: { interactionId: string; kind: string; options: string[]; operation?: string } = {
      interactionId: q.id,
      kind: "permission",
      options: q.kinds,
    };
    if (q.operation !== undefined) value.operation = q.operation;
    emit(run, { case: "question", value });
    q.timer = setTimeout(() => {
      logger.info({ runId: run.id, interactionId: q.id }, "interaction deadline passed on the host; cancelling the run");
      cancel(run, "deadline");
    }, run.interactionDeadlineMs);
    q.timer.unref();
    opts.onCapacity();
  }

  function createTerminal(session: SessionEntry, agent: AgentInstance, params: acp.CreateTerminalRequest): acp.CreateTerminalResponse {
    const run = session.run && session.run.state !== "done" ? session.run : undefined;
    const mode = run?.mode ?? "manual";
    let sandboxed = (profile.sandbox ?? "terminal") !== "none" && mode === "manual";
    if (sandboxed && run) {
      if (run.escalation.always) sandboxed = false;
      else if (run.escalation.once) {
        run.escalation.once = false;
        sandboxed = false;
      }
    }
    if (sandboxed && !opts.bwrap) {
      throw acp.RequestError.internalError(
        { reason: "sandbox_unavailable" },
        "manual mode refuses shell commands: bubblewrap (bwrap) is not installed on the intern host",
      );
    }
    const res = agent.terminals.create(params, {
      cwd: session.cwd,
      env: agentEnv(session.cwd),
      bwrap: sandboxed ? opts.bwrap : undefined,
      writable: [session.cwd],
      runAs: opts.runAs,
    });
    logger.debug({ session: session.key, runId: run?.id, sandboxed: res.sandboxed }, "terminal created");
    return { terminalId: res.terminalId };
  }

  /** fs access is confined to the working folder unless the run is self-drive as a normal user. */
  function checkPath(session: SessionEntry, path: string): string {
    if (!path.startsWith("/")) throw acp.RequestError.invalidParams({ path }, "path must be absolute");
    const run = session.run && session.run.state !== "done" ? session.run : undefined;
    const unconfined = run?.mode === "self-drive" && !opts.runAs && profile.sandbox !== "process";
    const abs = resolve(path);
    if (unconfined) return abs;
    const root = realpathSync(session.cwd);
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

  function outsideWorkingFolder(): acp.RequestError {
    return acp.RequestError.internalError({ reason: "outside_working_folder" }, "file access outside the session's working folder is not allowed");
  }

  function existsNoFollow(path: string): boolean {
    try {
      lstatSync(path);
      return true;
    } catch {
      return false;
    }
  }

  function readTextFile(session: SessionEntry, params: acp.ReadTextFileRequest): acp.ReadTextFileResponse {
    const p = checkPath(session, params.path);
    let content: string;
    try {
      content = readFileSync(p, "utf8");
    } catch {
      throw acp.RequestError.resourceNotFound(params.path);
    }
    if (params.line || params.limit) {
      const lines = content.split("\n");
      const start = Math.max(0, (params.line ?? 1) - 1);
      const end = params.limit ? start + params.limit : lines.length;
      content = lines.slice(start, end).join("\n");
    }
    return { content };
  }

  function writeTextFile(session: SessionEntry, params: acp.WriteTextFileRequest): void {
    const p = checkPath(session, params.path);
    mkdirSync(dirname(p), { recursive: true });
    // O_NOFOLLOW: a symlink planted after the check is not followed (the host may run as root).
    const fd = openSync(p, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW, 0o644);
    try {
      writeFileSync(fd, params.content);
      if (opts.runAs) fchownSync(fd, opts.runAs.uid, opts.runAs.gid);
    } finally {
      closeSync(fd);
    }
  }

  // ---------- runs ----------

  function reject(runId: string, reason: "busy" | "timeout" | "turn_failed", message: string): void {
    const session: SessionEntry = { key: "", cwd: "", agent: undefined, starting: undefined, previousAcpSessionId: undefined, run: undefined, lastUsed: 0 };
    const run = newRun(runId, session, "self-drive", 0);
    runs.set(runId, run);
    emit(run, { case: "rejected", value: { reason, message } });
    run.state = "done";
  }

  function newRun(id: string, session: SessionEntry, mode: Run["mode"], deadlineMs: number): Run {
    return {
      id,
      session,
      mode,
      state: "starting",
      nextSeq: 1n,
      lastWrittenSeq: 0n,
      queue: [],
      queuedBytes: 0,
      terminalEmitted: false,
      detached: false,
      held: false,
      presented: undefined,
      waiting: [],
      cancelCause: undefined,
      interactionDeadlineMs: deadlineMs > 0 ? deadlineMs : limits.defaultInteractionDeadlineMs,
      escalation: { once: false, always: false },
      costAtStart: undefined,
      model: undefined,
    };
  }

  function startRun(msg: StartRun): void {
    if (closed) return;
    if (runs.has(msg.runId)) {
      logger.warn({ runId: msg.runId }, "duplicate StartRun ignored");
      return;
    }
    const cap = capacity();
    if (cap.runningRuns >= limits.maxConcurrentRuns) return reject(msg.runId, "busy", "the intern host runs as many runs as it can");
    if (cap.pausedRuns >= limits.maxPausedRuns) return reject(msg.runId, "busy", "the intern host holds as many paused runs as it can");
    let session = sessions.get(msg.sessionId);
    if (!session) {
      session = { key: msg.sessionId, cwd: cwdFor(msg.sessionId), agent: undefined, starting: undefined, previousAcpSessionId: undefined, run: undefined, lastUsed: Date.now() };
      sessions.set(msg.sessionId, session);
    }
    if (session.run && session.run.state !== "done") return reject(msg.runId, "busy", "the session already has a run");
    const mode = msg.approvalMode === ApprovalMode.MANUAL ? "manual" : "self-drive";
    const run = newRun(msg.runId, session, mode, Number(msg.interactionDeadlineMs));
    runs.set(run.id, run);
    session.run = run;
    session.lastUsed = Date.now();
    opts.onCapacity();
    logger.info({ runId: run.id, session: session.key, mode }, "run starting");
    void driveRun(run, msg.prompt).catch((err: unknown) => {
      logger.error({ err, runId: run.id }, "run driver failed");
      finishRun(run);
    });
  }

  async function ensureAgent(session: SessionEntry): Promise<AgentInstance> {
    if (session.agent && !session.agent.dead) return session.agent;
    if (session.starting) return session.starting;
    const budget = new AbortController();
    const timer = setTimeout(() => budget.abort(), limits.agentStartBudgetMs);
    timer.unref();
    const p = Promise.race([
      startAgent(session, budget.signal),
      new Promise<never>((_, rej) =>
        budget.signal.addEventListener("abort", () => rej(Object.assign(new Error("the agent did not start in time"), { timeout: true })), { once: true }),
      ),
    ]);
    session.starting = p;
    try {
      const agent = await p;
      session.agent = agent;
      return agent;
    } finally {
      clearTimeout(timer);
      session.starting = undefined;
    }
  }

  async function driveRun(run: Run, prompt: string): Promise<void> {
    const session = run.session;
    let agent: AgentInstance;
    try {
      agent = await ensureAgent(session);
    } catch (err) {
      const timeout = (err as { timeout?: boolean }).timeout === true;
      logger.warn({ runId: run.id, err: timeout ? undefined : err }, timeout ? "agent start budget exceeded" : "agent failed to start");
      if (!run.detached && !run.terminalEmitted) {
        if (run.cancelCause) emit(run, { case: "runEnded", value: { cancelled: true, deadline: false } });
        else
          emit(run, {
            case: "rejected",
            value: timeout
              ? { reason: "timeout", message: "the agent did not start within its start budget" }
              : { reason: "turn_failed", message: `the agent could not be started: ${clip((err as Error).message ?? String(err))}` },
          });
      }
      finishRun(run);
      return;
    }
    if (run.cancelCause) {
      emit(run, { case: "runEnded", value: { cancelled: true, deadline: run.cancelCause === "deadline" || run.cancelCause === "duration" } });
      finishRun(run);
      return;
    }
    const wantMode = run.mode === "manual" ? profile.modes?.manual : profile.modes?.selfDrive;
    if (wantMode && wantMode !== agent.currentModeId && agent.availableModes.has(wantMode)) {
      try {
        await agent.conn.agent.request(acp.methods.agent.session.setMode, { sessionId: agent.acpSessionId, modeId: wantMode });
        agent.currentModeId = wantMode;
      } catch (err) {
        logger.warn({ runId: run.id, err }, "session/set_mode failed; continuing in the agent's current mode");
      }
    }
    if (run.cancelCause || agent.dead) {
      if (agent.dead) emit(run, { case: "turnFailed", value: { code: 502, reason: "turn_failed", message: `the agent process ${agent.exitInfo ?? "ended"} before the turn`, retryable: true } });
      else emit(run, { case: "runEnded", value: { cancelled: true, deadline: false } });
      finishRun(run);
      return;
    }
    run.costAtStart = agent.lastCost;
    run.state = "streaming";
    const promptDone = agent.conn.agent.request(acp.methods.agent.session.prompt, {
      sessionId: agent.acpSessionId,
      prompt: [{ type: "text", text: prompt }],
    });
    emit(run, { case: "started", value: {} });
    if (agent.model) reportModel(run, agent.model);
    run.durationTimer = setTimeout(() => cancel(run, "duration"), limits.maxRunDurationMs);
    run.durationTimer.unref();
    try {
      const res = await promptDone;
      const deadline = run.cancelCause === "deadline" || run.cancelCause === "duration";
      if (res.stopReason === "cancelled" || run.cancelCause) {
        emit(run, { case: "runEnded", value: { cancelled: true, deadline } });
      } else {
        const costDelta = agent.lastCost !== undefined ? agent.lastCost - (run.costAtStart ?? 0) : undefined;
        const usage = usageFromTurn((res as { usage?: unknown }).usage, costDelta);
        if (usage) emit(run, { case: "usage", value: usage });
        emit(run, { case: "turnEnded", value: { stopReason: res.stopReason } });
      }
    } catch (err) {
      const deadline = run.cancelCause === "deadline" || run.cancelCause === "duration";
      if (run.cancelCause) {
        emit(run, { case: "runEnded", value: { cancelled: true, deadline } });
      } else if (agent.dead || agent.conn.signal.aborted) {
        await Promise.race([agent.channel.exited, new Promise((r) => setTimeout(r, 200))]);
        emit(run, {
          case: "turnFailed",
          value: { code: 502, reason: "turn_failed", message: `the agent process ${agent.exitInfo ?? "closed its connection"} during the turn`, retryable: true },
        });
      } else {
        const e = err as { message?: string; code?: number };
        emit(run, {
          case: "turnFailed",
          value: { code: 502, reason: "turn_failed", message: `the agent failed the turn: ${clip(e.message ?? String(err))}`, retryable: false },
        });
      }
    }
    finishRun(run);
  }

  function settleAllQuestions(run: Run): void {
    const qs = [...(run.presented ? [run.presented] : []), ...run.waiting];
    run.presented = undefined;
    run.waiting = [];
    for (const q of qs) q.settle({ outcome: "cancelled" });
  }

  function finishRun(run: Run): void {
    if (run.state === "done") return;
    run.state = "done";
    settleAllQuestions(run);
    // The held timer stays: a finished run whose events wait for a reconnect is dropped after the grace.
    for (const t of [run.cancelTimer, run.durationTimer]) if (t) clearTimeout(t);
    const session = run.session;
    if (session.run === run) session.run = undefined;
    session.lastUsed = Date.now();
    // Kept until the link has taken its last event (takeEvent deletes it then).
    if (run.detached || run.queue.length === 0) runs.delete(run.id);
    logger.info({ runId: run.id }, "run finished");
    opts.onCapacity();
  }

  function cancel(run: Run, cause: CancelCause): void {
    if (run.state === "done" || run.cancelCause) return;
    run.cancelCause = cause;
    if (run.state === "starting") return; // driveRun checks cancelCause once the agent is up
    run.state = "cancelling";
    const agent = run.session.agent;
    // ACP order: session/cancel first, then a "cancelled" outcome for every pending permission.
    if (agent && !agent.dead) agent.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: agent.acpSessionId }).catch(() => {});
    settleAllQuestions(run);
    opts.onCapacity();
    if (!agent || agent.dead) return;
    run.cancelTimer = setTimeout(() => {
      if (run.state === "done") return;
      logger.warn({ runId: run.id }, "agent did not confirm the cancel in time; stopping its process");
      void agent.channel.dispose(0);
    }, limits.cancelGraceMs);
    run.cancelTimer.unref();
  }

  function answer(runId: string, interactionId: string, value: string): AnswerOutcome {
    const run = runs.get(runId);
    if (!run || run.state !== "streaming" || run.detached) return AnswerOutcome.NOT_PENDING;
    const q = run.presented;
    if (!q || q.id !== interactionId) return AnswerOutcome.NOT_PENDING;
    if (value === "cancel") {
      cancel(run, "caller");
      return AnswerOutcome.ACCEPTED;
    }
    if (!isOptionKind(value) || !q.kinds.includes(value)) return AnswerOutcome.NOT_OFFERED;
    const optionId = optionIdForKind(q.options, value);
    if (!optionId) return AnswerOutcome.NOT_OFFERED;
    if (value.startsWith("allow") && (q.operation === "shell" || q.operation === undefined)) {
      if (value === "allow_always") run.escalation.always = true;
      else run.escalation.once = true;
    }
    run.presented = undefined;
    q.settle({ outcome: "selected", optionId });
    const next = run.waiting.shift();
    if (next) present(run, next);
    opts.onCapacity();
    return AnswerOutcome.ACCEPTED;
  }

  function cancelRun(runId: string, reason: CancelReason): void {
    const run = runs.get(runId);
    if (!run || run.state === "done") return;
    const cause: CancelCause =
      reason === CancelReason.CLIENT_DISCONNECTED ? "client" : reason === CancelReason.DEADLINE ? "deadline" : reason === CancelReason.CALLER ? "caller" : "operator";
    cancel(run, cause);
  }

  function takeEvent(): RunEvent | undefined {
    const list = [...runs.values()];
    if (list.length === 0) return undefined;
    for (let i = 0; i < list.length; i++) {
      const run = list[(rrCursor + i) % list.length]!;
      if (run.held || run.detached) continue;
      const item = run.queue.shift();
      if (!item) continue;
      rrCursor = (rrCursor + i + 1) % Math.max(1, list.length);
      run.queuedBytes -= item.bytes;
      run.lastWrittenSeq = item.event.seq;
      if (run.state === "done" && run.queue.length === 0) runs.delete(run.id);
      return item.event;
    }
    return undefined;
  }

  function dropRun(run: Run): void {
    run.detached = true;
    run.held = false;
    if (run.heldTimer) clearTimeout(run.heldTimer);
    run.queue = [];
    run.queuedBytes = 0;
    if (run.state === "done") runs.delete(run.id);
  }

  function linkDown(): void {
    if (!linkIsUp) return;
    linkIsUp = false;
    for (const run of [...runs.values()]) {
      if (run.detached || run.held) continue;
      const paused = run.presented !== undefined && run.state === "streaming";
      const finishedWithEvents = run.state === "done" && run.queue.length > 0;
      if (paused) {
        run.held = true;
        run.heldTimer = setTimeout(() => {
          logger.info({ runId: run.id }, "held run not reclaimed in time; cancelling it");
          cancel(run, "link");
          dropRun(run);
        }, limits.heldRunGraceMs);
        run.heldTimer.unref();
      } else if (finishedWithEvents) {
        dropRun(run);
      } else {
        logger.info({ runId: run.id }, "link broke while the run was streaming; cancelling it");
        dropRun(run);
        cancel(run, "link");
      }
    }
  }

  function heldRuns(): HeldRun[] {
    return [...runs.values()]
      .filter((r) => r.held && !r.detached)
      .map((r) => ({ runId: r.id, lastSeq: r.lastWrittenSeq, pendingInteractionId: r.presented?.id ?? "" }) as HeldRun);
  }

  function linkUp(cancelRunIds: readonly string[]): void {
    linkIsUp = true;
    const drop = new Set(cancelRunIds);
    for (const run of [...runs.values()]) {
      if (!run.held) continue;
      if (run.heldTimer) clearTimeout(run.heldTimer);
      run.held = false;
      if (drop.has(run.id)) {
        cancel(run, "operator");
        dropRun(run);
      }
    }
    opts.onReadable();
    opts.onCapacity();
  }

  function reapIdleAgents(): void {
    const now = Date.now();
    for (const s of sessions.values()) {
      if (s.run || s.starting || !s.agent) continue;
      if (now - s.lastUsed < limits.idleAgentTtlMs) continue;
      const agent = s.agent;
      s.agent = undefined;
      logger.debug({ session: s.key }, "stopping idle agent");
      agent.terminals.disposeAll();
      void agent.channel.dispose(limits.cancelGraceMs);
    }
  }

  return {
    startRun,
    answer,
    cancelRun,
    takeEvent,
    linkDown,
    heldRuns,
    linkUp,
    capacity,
    sessions: () =>
      [...sessions.values()].map((s) => ({
        sessionId: s.key,
        cwd: s.cwd,
        agentPid: s.agent?.channel.pid,
        agentAlive: Boolean(s.agent && !s.agent.dead),
        runId: s.run?.id,
      })),
    agentName: () => profile.name ?? basename(profile.command),
    async close() {
      closed = true;
      clearInterval(reaper);
      for (const run of runs.values()) {
        if (run.state !== "done") cancel(run, "operator");
        dropRun(run);
      }
      const waits: Promise<void>[] = [];
      for (const s of sessions.values()) {
        const agent = s.agent ?? (s.starting ? await s.starting.catch(() => undefined) : undefined);
        if (!agent) continue;
        agent.terminals.disposeAll();
        waits.push(agent.channel.dispose(500));
      }
      await Promise.all(waits);
      sessions.clear();
    },
  };
}
