/**
 * Agent session lifecycle: the host's sessions (one caller session_id each), the agent process that
 * serves a session (spawn, initialize, optional authenticate, session/new|resume|load), the cap on
 * live agents with least-recently-used eviction of idle ones, idle reaping, pruning of ended
 * sessions, and closing everything.
 */
import type * as acp from "@agentclientprotocol/sdk";
import { acpRuntime, loadAcp } from "./acp-runtime.js";
import type { Logger } from "pino";
import type { AgentChannel, AgentLauncher } from "./agent-process.js";
import { agentLaunch, profileUsesModelTemplating, type AgentFolders } from "./agent-env.js";
import type { ModelRelay, RelayEndpoint, RelayTarget } from "./model-relay.js";
import { acpErrorText, modelFromSessionState, repairIncomingMessage } from "./mapping.js";
import type { AgentProfile, InternHostLimits } from "./options.js";
import { createTerminalManager, type TerminalManager } from "./terminals.js";

export interface AgentInstance {
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
  /** When the agent last sent a session/update (replayed history included); undefined before any. */
  lastUpdateAt: number | undefined;
  /** Set when an earlier conversation could not be restored and a new ACP session was opened instead: the next run says so. */
  restoreNote: string | undefined;
  exitInfo: string | undefined;
  /** The model relay endpoint this process was given (when it started for a run with a model gateway). */
  relay: RelayEndpoint | undefined;
  /**
   * How this process reaches Portico's model endpoints: "acp" (ACP `authenticate` with method
   * `gateway`), "profile" (the profile's `modelGateway` family or placeholders, fixed at spawn),
   * "none" (it was started for a run without a gateway, or it takes neither).
   */
  gatewayVia: "acp" | "profile" | "none";
  /** The gateway model the process was started with; undefined when it was started without a gateway. */
  gatewayModel: string | undefined;
}

/** What a run asks of its agent's model access. */
export interface AgentGatewayNeed {
  /** The intern's model from the run's gateway. */
  model: string;
}

/** The ACP auth method id through which agents take Portico's base URL and headers (gemini-cli, claude-agent-acp). */
export const GATEWAY_AUTH_METHOD = "gateway";

export interface SessionEntry<R> {
  key: string;
  cwd: string;
  agent: AgentInstance | undefined;
  starting: Promise<AgentInstance> | undefined;
  previousAcpSessionId: string | undefined;
  run: R | undefined;
  lastUsed: number;
}

/** An agent that could not start: the message carries the reason and the tail of its stderr. */
export class AgentStartError extends Error {
  constructor(
    message: string,
    readonly timeout: boolean,
  ) {
    super(message);
  }
}

/** No agent slot is free: every live agent serves a run. */
export class AgentCapReached extends Error {}

export interface AgentPoolOptions<R> {
  profile: AgentProfile;
  limits: InternHostLimits;
  logger: Logger;
  folders: AgentFolders;
  runAs: { uid: number; gid: number } | undefined;
  bwrap: string | undefined;
  launcher: AgentLauncher;
  hostVersion: string;
  /** The ACP client side (handlers) for one session's agent. */
  clientApp: (session: SessionEntry<R>, agent: () => AgentInstance) => acp.ClientApp;
  /** The loopback relay that carries agents' model calls to Portico with the current run's token. */
  relay: ModelRelay;
  /** The gateway of the session's current run, when it has one (what the relay forwards to). */
  relayTarget: (session: SessionEntry<R>) => RelayTarget | undefined;
}

export interface AgentPool<R> {
  /** The session for a caller session id (created and remembered on first use). */
  session(key: string): SessionEntry<R>;
  /**
   * The live agent of a session, starting (or bringing back) one when needed. `gateway`: the run's model
   * gateway; a live agent started with a different wiring (with vs without a gateway, or another model
   * baked into its environment) is stopped and started again for it.
   */
  ensureAgent(session: SessionEntry<R>, gateway?: AgentGatewayNeed): Promise<AgentInstance>;
  /** Stops idle agents past their TTL and forgets old ended sessions. */
  reap(now?: number): void;
  entries(): IterableIterator<SessionEntry<R>>;
  liveAgents(): number;
  /** Stops every agent (and its process group); resolves when they are gone. */
  closeAll(): Promise<void>;
}

function exitDescription(exit: { code: number | null; signal: string | null; error?: string | undefined }): string {
  return exit.error ? `could not start (${exit.error})` : exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** After a `session/load` answered without replaying first, how long the agent must stay quiet before the run's prompt goes out. */
export const REPLAY_QUIET_MS = 150;
/** The longest a start waits for a late replay to end. */
export const REPLAY_SETTLE_MAX_MS = 2_000;
/** How long an evicted (idle) agent may take to exit after end of input before it is signalled. */
export const EVICTION_GRACE_MS = 200;

export function createAgentPool<R>(opts: AgentPoolOptions<R>): AgentPool<R> {
  const { limits, logger, profile, folders } = opts;
  const sessions = new Map<string, SessionEntry<R>>();
  /** Slots taken by live or starting agents (a slot is freed when its process has exited). */
  let slots = 0;
  const slotWaiters: Array<() => void> = [];

  function releaseSlot(): void {
    slots -= 1;
    slotWaiters.shift()?.();
  }

  async function startAgent(session: SessionEntry<R>, budget: AbortSignal, gateway: AgentGatewayNeed | undefined): Promise<AgentInstance> {
    const sandboxProcess = profile.sandbox === "process";
    let channel: AgentChannel;
    let relay: RelayEndpoint | undefined;
    try {
      folders.ensureDir(session.cwd);
      folders.ensureDir(folders.homeDir);
      folders.checkReachable(session.cwd);
      folders.checkReachable(folders.homeDir);
      if (sandboxProcess && !opts.bwrap) throw new Error("the agent profile asks for a process sandbox but bubblewrap (bwrap) is not installed");
      if (gateway) relay = await opts.relay.register(() => opts.relayTarget(session));
      const launch = agentLaunch(profile, folders.homeDir, session.cwd, relay ? { baseUrl: relay.baseUrl, token: relay.secret, model: gateway?.model ?? "" } : undefined);
      await loadAcp();
      channel = await opts.launcher({
      command: profile.command,
      args: launch.args,
      env: launch.env,
      cwd: session.cwd,
      runAs: opts.runAs,
      bwrap: sandboxProcess && opts.bwrap ? { path: opts.bwrap, writable: [session.cwd, folders.homeDir] } : undefined,
      });
    } catch (err) {
      relay?.dispose();
      releaseSlot(); // no process: the slot taken for it is free again
      throw err;
    }
    const onBudget = (): void => void channel.dispose(0);
    budget.addEventListener("abort", onBudget, { once: true });
    let exitInfo: string | undefined;
    let connection: acp.ClientConnection | undefined;
    try {
      const raw = acpRuntime().ndJsonStream(channel.output, channel.input, { maxMessageBytes: limits.maxAcpLineBytes });
      const tap = new TransformStream<acp.AnyMessage, acp.AnyMessage>({
        transform(msg, c) {
          if (repairIncomingMessage(msg)) logger.debug({ session: session.key }, "repaired a malformed usage_update from the agent");
          c.enqueue(msg);
        },
      });
      const stream = { writable: raw.writable, readable: raw.readable.pipeThrough(tap) };
      // eslint-disable-next-line prefer-const
      let agent: AgentInstance;
      const conn = opts.clientApp(session, () => agent).connect(stream);
      connection = conn;
      agent = {
        channel,
        conn,
        toolKinds: new Map(),
        availableModes: new Set(),
        terminals: createTerminalManager({ maxOpen: limits.maxOpenTerminalsPerSession, maxOutputBytes: limits.maxTerminalOutputBytes }),
        dead: false,
        suppressUpdates: false,
        lastUpdateAt: undefined,
        restoreNote: undefined,
        relay,
        gatewayVia: "none",
        gatewayModel: gateway?.model,
      } as Partial<AgentInstance> as AgentInstance;
      void channel.exited.then((exit) => {
        agent.dead = true;
        agent.exitInfo = exitInfo = exitDescription(exit);
        agent.terminals.disposeAll();
        agent.relay?.dispose();
        conn.close(new Error("agent process exited"));
        if (session.agent === agent) session.agent = undefined;
        releaseSlot();
        logger.debug({ session: session.key, exit, stderrTail: channel.stderrTail() }, "agent process ended");
      });
      const offerFs = profile.offerFs ?? true;
      const init = await conn.agent.request(acpRuntime().methods.agent.initialize, {
        protocolVersion: acpRuntime().PROTOCOL_VERSION,
        clientCapabilities: {
          fs: { readTextFile: offerFs, writeTextFile: offerFs },
          terminal: profile.offerTerminal ?? true,
          // The host can hand the agent a model gateway (base URL + headers) through `authenticate`.
          ...(relay ? { auth: { _meta: { gateway: true } } } : {}),
        },
        clientInfo: { name: "portico-intern-host", version: opts.hostVersion },
      });
      if (init.protocolVersion !== acpRuntime().PROTOCOL_VERSION) {
        throw new Error(`the agent answered protocol version ${String(init.protocolVersion)}; this host speaks ${acpRuntime().PROTOCOL_VERSION}`);
      }
      agent.init = init;
      const offered = (init.authMethods ?? []).map((m) => m.id);
      const viaAcp = relay !== undefined && offered.includes(GATEWAY_AUTH_METHOD) && (!profile.authMethod || profile.authMethod === GATEWAY_AUTH_METHOD);
      if (viaAcp && relay) {
        // Shape verified against gemini-cli 0.61.0 (GeminiAgent.authenticate: `_meta.gateway` = {baseUrl?, headers?})
        // and observed with claude-agent-acp 0.101.0 (shared/reference/real-agents.md). The URL and secret are the
        // relay's, stable for the life of this process; the run token never reaches the agent.
        await conn.agent.request(acpRuntime().methods.agent.authenticate, {
          methodId: GATEWAY_AUTH_METHOD,
          _meta: { gateway: { baseUrl: relay.baseUrl, headers: { Authorization: `Bearer ${relay.secret}` } } },
        });
      } else if (profile.authMethod) await authenticate(conn, init, profile.authMethod);
      agent.gatewayVia = !relay ? "none" : profileUsesModelTemplating(profile) ? "profile" : viaAcp ? "acp" : "none";
      if (relay && agent.gatewayVia === "none") {
        logger.info(
          { session: session.key, offered },
          "the run has a model gateway but the agent offers no ACP gateway auth and the profile sets no modelGateway: the agent uses its own model configuration",
        );
      }
      await openAcpSession(session, agent);
      if (budget.aborted) throw new Error("agent start budget exceeded");
      return agent;
    } catch (err) {
      const exitedFirst = exitInfo; // the process ended before the error: its exit explains it
      const connectionLost = connection?.signal.aborted === true;
      // Give an exiting agent a moment so its exit status and stderr explain the failure.
      await Promise.race([channel.exited, new Promise((r) => setTimeout(r, 300).unref())]);
      const tail = stderrSummary(channel.stderrTail());
      await channel.dispose(0);
      // The connection closed because the process ended: its exit status is the reason.
      const exit = exitedFirst ?? (connectionLost ? exitInfo : undefined);
      const base = exit ? `the agent process ${exit}` : acpErrorText(err);
      throw new AgentStartError(tail ? `${base}; agent stderr: ${tail}` : base, budget.aborted);
    } finally {
      budget.removeEventListener("abort", onBudget);
    }
  }

  async function authenticate(conn: acp.ClientConnection, init: acp.InitializeResponse, methodId: string): Promise<void> {
    const offered = (init.authMethods ?? []).map((m) => m.id);
    if (!offered.includes(methodId)) {
      throw new Error(`the profile's authMethod "${methodId}" is not offered by the agent (offered: ${offered.join(", ") || "none"})`);
    }
    await conn.agent.request(acpRuntime().methods.agent.authenticate, { methodId });
  }

  async function openAcpSession(session: SessionEntry<R>, agent: AgentInstance): Promise<void> {
    const { conn } = agent;
    const caps = agent.init.agentCapabilities ?? {};
    let state: { modes?: acp.SessionModeState | null; configOptions?: unknown; models?: unknown } | undefined;
    const prev = session.previousAcpSessionId;
    const restore = prev ? (caps.sessionCapabilities?.resume ? "resume" : caps.loadSession ? "load" : undefined) : undefined;
    let restored = false;
    if (prev && restore) {
      // Whatever the agent sends while a session comes back is history, not output of a run.
      agent.suppressUpdates = true;
      agent.acpSessionId = prev;
      try {
        if (restore === "resume") {
          state = (await conn.agent.request(acpRuntime().methods.agent.session.resume, { sessionId: prev, cwd: session.cwd, mcpServers: [] })) as typeof state;
        } else {
          agent.lastUpdateAt = undefined;
          state = ((await conn.agent.request(acpRuntime().methods.agent.session.load, { sessionId: prev, cwd: session.cwd, mcpServers: [] })) ?? {}) as typeof state;
          // ACP replays before the answer; gemini-cli replays after it. No update before the answer: wait until
          // the agent has been quiet for a moment, so a late replay is dropped here and not taken for the answer.
          if (agent.lastUpdateAt === undefined) await settleReplay(agent);
        }
        restored = true;
      } catch (err) {
        if (agent.dead || conn.signal.aborted) throw err;
        // The folder stays; the conversation does not: say so, and go on in a new ACP session (a failed
        // restore must not make every later prompt of this session fail the same way).
        const reason = acpErrorText(err);
        logger.info({ session: session.key, method: `session/${restore}`, reason }, "the agent could not restore the session; starting a new agent session in the same folder");
        agent.restoreNote = `The agent could not restore this session's earlier conversation (session/${restore}: ${reason}); it goes on in a new agent session in the same working folder.`;
      }
    }
    try {
      if (!restored) {
        const res = await conn.agent.request(acpRuntime().methods.agent.session.new, { cwd: session.cwd, mcpServers: [] }).catch((err: unknown) => {
          throw authHint(err, agent.init);
        });
        agent.acpSessionId = res.sessionId;
        state = res as typeof state;
        if (prev && !restore) logger.info({ session: session.key }, "agent cannot resume sessions; started a new agent session");
      }
    } finally {
      agent.suppressUpdates = false;
    }
    if (state?.modes) {
      agent.currentModeId = state.modes.currentModeId;
      for (const m of state.modes.availableModes) agent.availableModes.add(m.id);
    }
    agent.model = modelFromSessionState(state ?? {});
    session.previousAcpSessionId = agent.acpSessionId;
  }

  /** Resolves once the agent has sent nothing for {@link REPLAY_QUIET_MS} (at most {@link REPLAY_SETTLE_MAX_MS}). */
  async function settleReplay(agent: AgentInstance): Promise<void> {
    const start = Date.now();
    for (;;) {
      const now = Date.now();
      const quietFor = now - Math.max(start, agent.lastUpdateAt ?? start);
      if (quietFor >= REPLAY_QUIET_MS || now - start >= REPLAY_SETTLE_MAX_MS || agent.dead) return;
      await new Promise((r) => setTimeout(r, REPLAY_QUIET_MS - quietFor).unref());
    }
  }

  /**
   * Stops an agent and resolves once its process has exited. An evicted agent is idle and a new run waits
   * for its slot: it gets end of input and {@link EVICTION_GRACE_MS} to exit on its own (time to save its
   * session), then SIGTERM; agents that ignore end of input (claude-code-acp, codex-acp) do not hold the
   * new run for the cancel grace.
   */
  async function stopAgent(session: SessionEntry<R>, why: "idle" | "evicted" | "rewire"): Promise<void> {
    const agent = session.agent;
    if (!agent) return;
    session.agent = undefined;
    logger.debug({ session: session.key, why }, "stopping agent");
    agent.terminals.disposeAll();
    await agent.channel.dispose(why !== "idle" ? Math.min(EVICTION_GRACE_MS, limits.cancelGraceMs) : limits.cancelGraceMs);
    await agent.channel.exited;
  }

  /** The least recently used session whose agent is idle (no run, not starting). */
  function lruIdle(): SessionEntry<R> | undefined {
    let best: SessionEntry<R> | undefined;
    for (const s of sessions.values()) {
      if (!s.agent || s.run || s.starting) continue;
      if (!best || s.lastUsed < best.lastUsed) best = s;
    }
    return best;
  }

  /** Takes an agent slot: evicts idle agents LRU at the cap, fails when none is idle. */
  async function takeSlot(): Promise<void> {
    const cap = Math.max(1, limits.maxAgents);
    while (slots >= cap) {
      const victim = lruIdle();
      if (!victim) throw new AgentCapReached(`every agent process on this host (${cap}) is serving a run`);
      const freed = new Promise<void>((r) => slotWaiters.push(r));
      logger.info({ session: victim.key }, "agent cap reached; stopping the least recently used idle agent");
      await stopAgent(victim, "evicted");
      await freed;
    }
    slots += 1; // released when the agent's process has exited (or could not be launched)
  }

  /** A live agent no longer fits the run: started without a gateway for a run with one (or the reverse), or with another model baked in. */
  function wiredOtherwise(agent: AgentInstance, gateway: AgentGatewayNeed | undefined): boolean {
    if ((agent.gatewayModel === undefined) !== (gateway === undefined)) return true;
    return gateway !== undefined && agent.gatewayVia === "profile" && agent.gatewayModel !== gateway.model;
  }

  async function ensureAgent(session: SessionEntry<R>, gateway?: AgentGatewayNeed): Promise<AgentInstance> {
    if (session.agent && !session.agent.dead && !session.starting && wiredOtherwise(session.agent, gateway)) {
      logger.info({ session: session.key, gateway: gateway !== undefined }, "the run's model gateway differs from the one the agent was started with; restarting the agent");
      await stopAgent(session, "rewire");
    }
    if (session.agent && !session.agent.dead) return session.agent;
    if (session.starting) return session.starting;
    const p = (async () => {
      await takeSlot();
      const budget = new AbortController();
      const timer = setTimeout(() => budget.abort(), limits.agentStartBudgetMs);
      timer.unref();
      try {
        return await Promise.race([
          startAgent(session, budget.signal, gateway),
          new Promise<never>((_, rej) =>
            budget.signal.addEventListener("abort", () => rej(new AgentStartError("the agent did not start in time", true)), { once: true }),
          ),
        ]);
      } finally {
        clearTimeout(timer);
      }
    })();
    session.starting = p;
    try {
      const agent = await p;
      session.agent = agent;
      return agent;
    } finally {
      session.starting = undefined;
    }
  }

  function reap(now = Date.now()): void {
    for (const s of [...sessions.values()]) {
      if (s.run || s.starting) continue;
      if (s.agent && now - s.lastUsed >= limits.idleAgentTtlMs) void stopAgent(s, "idle");
      else if (!s.agent && now - s.lastUsed >= limits.sessionRecordTtlMs) sessions.delete(s.key);
    }
  }

  return {
    session(key) {
      let s = sessions.get(key);
      if (!s) {
        s = { key, cwd: folders.cwdFor(key), agent: undefined, starting: undefined, previousAcpSessionId: undefined, run: undefined, lastUsed: Date.now() };
        sessions.set(key, s);
      }
      return s;
    },
    ensureAgent,
    reap,
    entries: () => sessions.values(),
    liveAgents: () => [...sessions.values()].filter((s) => s.agent && !s.agent.dead).length,
    async closeAll() {
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

/** An "Authentication required" answer (ACP -32000) names the profile setting and the methods the agent offers. */
function authHint(err: unknown, init: acp.InitializeResponse): unknown {
  if ((err as { code?: unknown }).code !== -32000) return err;
  const offered = (init.authMethods ?? []).map((m) => m.id);
  return new Error(
    `${acpErrorText(err)}: the agent requires ACP authenticate; set the profile's "authMethod" to one of: ${offered.join(", ") || "(the agent offers none)"}`,
  );
}

/** The end of an agent's stderr without stack frames or blank lines (the part that names the cause). */
export function stderrSummary(stderr: string, max = 400): string {
  const lines = stderr
    .split(/\r?\n/)
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== "" && !/^\s+at\s/.test(l) && !/^\s*\^+\s*$/.test(l));
  const text = lines.join("\n");
  return text.length <= max ? text : `…${text.slice(-max)}`;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
