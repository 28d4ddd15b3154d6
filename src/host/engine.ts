/**
 * The host engine: runs (one ACP prompt turn each) over the sessions of the agent pool, and the
 * link-facing surface. It knows nothing about the transport: the link calls startRun/answer/cancelRun
 * and pulls events. It composes one module per concern, each a small factory with its dependencies:
 *
 *   run-table.ts      the runs by id: new run records, live and paused counts (capacity), dropping a run
 *   run-control.ts    a run's state changes: queue an event, report the model, cancel, finish
 *   run-questions.ts  questions: present one to the core (the run pauses), judge and settle an answer
 *   run-driver.ts     StartRun admission and the prompt turn (agent, mode, prompt, the run's last events)
 *   link-state.ts     the link to the core: events taken round-robin, held runs across a reconnect
 *   acp-client.ts     the ACP client handlers an agent calls (updates, permission requests, terminals,
 *                     fs), which feed runs through RunControl
 *
 * Below them: run.ts (the run record), agent-session.ts (agents and sessions), agent-env.ts (folders and
 * environment), file-access.ts (fs confinement), questions.ts + escalation.ts (questions and sealed
 * escalation), event-queue.ts (bounded per-run queues).
 */
import { basename } from "node:path";
import type { Logger } from "pino";
import type { AnswerOutcome, CancelReason, HeldRun, RunEvent, StartRun } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { createAcpClient } from "./acp-client.js";
import { spawnAgentProcess, type AgentLauncher } from "./agent-process.js";
import { agentFolders } from "./agent-env.js";
import { createAgentPool } from "./agent-session.js";
import type { AgentProfile, InternHostLimits } from "./options.js";
import type { Run } from "./run.js";
import { createModelRelay } from "./model-relay.js";
import { createRunTable } from "./run-table.js";
import { createRunControl } from "./run-control.js";
import { createRunQuestions } from "./run-questions.js";
import { createRunDriver } from "./run-driver.js";
import { createLinkState } from "./link-state.js";

export { sessionFolderName } from "./agent-env.js";

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
  /** CA bundle (PEM) that verifies an https model gateway (the link's); default: the system CAs. */
  gatewayCa?: string | Buffer | undefined;
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
  /** Stops every run and agent process (and its process group); resolves when they are gone. */
  close(): Promise<void>;
}

export function createHostEngine(opts: EngineOptions): HostEngine {
  const { limits, logger, profile } = opts;
  let closed = false;
  const onReadable = () => opts.onReadable();
  const onCapacity = () => opts.onCapacity();
  const folders = agentFolders({ profile, workRoot: opts.workRoot, runAs: opts.runAs });
  const relay = createModelRelay({ logger, ca: opts.gatewayCa });
  const table = createRunTable(limits);
  const control = createRunControl({ table, limits, logger, onReadable, onCapacity });
  const questions = createRunQuestions({ table, control, limits, logger, onCapacity });
  const pool = createAgentPool<Run>({
    profile,
    limits,
    logger,
    folders,
    runAs: opts.runAs,
    bwrap: opts.bwrap,
    launcher: opts.launcher ?? spawnAgentProcess,
    hostVersion: opts.hostVersion,
    relay,
    relayTarget: (session) => {
      const run = table.activeRunOf(session);
      return run?.gateway ? { runId: run.id, baseUrl: run.gateway.baseUrl, token: run.gateway.token } : undefined;
    },
    clientApp: createAcpClient({
      profile,
      logger,
      folders,
      runAs: opts.runAs,
      bwrap: opts.bwrap,
      runs: { activeRunOf: table.activeRunOf, emit: control.emit, reportModel: control.reportModel, present: questions.present, onCapacity },
    }),
  });
  const driver = createRunDriver({ table, control, pool, profile, limits, logger, onCapacity, closed: () => closed });
  const link = createLinkState({ table, control, limits, logger, onReadable, onCapacity });

  const reaper = setInterval(() => pool.reap(), Math.max(250, Math.min(limits.idleAgentTtlMs / 2, 30_000)));
  reaper.unref();

  return {
    startRun: driver.startRun,
    answer: questions.answer,
    cancelRun: control.cancelRun,
    takeEvent: link.takeEvent,
    linkDown: link.linkDown,
    heldRuns: link.heldRuns,
    linkUp: link.linkUp,
    capacity: table.capacity,
    sessions: () =>
      [...pool.entries()].map((s) => ({
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
      for (const run of table.all()) {
        if (run.state !== "done") control.cancel(run, "operator");
        table.dropRun(run);
      }
      await pool.closeAll();
      await relay.close();
    },
  };
}
