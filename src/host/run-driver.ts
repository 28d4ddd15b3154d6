/**
 * Driving a host run: admission of a StartRun (capacity, the session's one run), then the run's one
 * ACP prompt turn: start (or reuse) the session's agent, set the approval mode, prompt, and turn the
 * outcome into the run's last events (usage, then TurnEnded, TurnFailed or RunEnded).
 */
import type { Logger } from "pino";
import { ApprovalMode, type StartRun } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { Reason } from "../contract/reasons.js";
import { acpRuntime } from "./acp-runtime.js";
import { AgentCapReached, AgentStartError, type AgentInstance, type AgentPool } from "./agent-session.js";
import { acpErrorText, clip, usageFromTurn } from "./mapping.js";
import type { AgentProfile, InternHostLimits } from "./options.js";
import type { Run, Session } from "./run.js";
import type { RunTable } from "./run-table.js";
import { rejected, turnFailed, type HostRunControl } from "./run-control.js";

export interface RunDriverDeps {
  table: RunTable;
  control: HostRunControl;
  pool: AgentPool<Run>;
  profile: AgentProfile;
  limits: InternHostLimits;
  logger: Logger;
  onCapacity: () => void;
  /** The engine is closing: StartRun is ignored. */
  closed: () => boolean;
}

export function createRunDriver(deps: RunDriverDeps) {
  const { table, control, pool, profile, limits, logger } = deps;
  const { emit, finishRun } = control;

  /** A run refused before it started: one RunRejected event, and it is done. */
  function reject(runId: string, reason: Reason.HOST_BUSY | Reason.TIMEOUT | Reason.TURN_FAILED, message: string): void {
    const session: Session = { key: "", cwd: "", agent: undefined, starting: undefined, previousAcpSessionId: undefined, run: undefined, lastUsed: 0 };
    const run = table.newRun(runId, session, "self-drive", 0);
    table.add(run);
    emit(run, { case: "rejected", value: rejected(reason, message) });
    run.state = "done";
  }

  function startRun(msg: StartRun): void {
    if (deps.closed()) return;
    if (table.has(msg.runId)) {
      logger.warn({ runId: msg.runId }, "duplicate StartRun ignored");
      return;
    }
    const cap = table.capacity();
    if (cap.runningRuns >= limits.maxConcurrentRuns) return reject(msg.runId, Reason.HOST_BUSY, "the intern host runs as many runs as it can");
    if (cap.pausedRuns >= limits.maxPausedRuns) return reject(msg.runId, Reason.HOST_BUSY, "the intern host holds as many paused runs as it can");
    const session = pool.session(msg.sessionId);
    if (session.run && session.run.state !== "done") return reject(msg.runId, Reason.HOST_BUSY, "the session already has a run");
    const mode = msg.approvalMode === ApprovalMode.MANUAL ? "manual" : "self-drive";
    const run = table.newRun(msg.runId, session, mode, Number(msg.interactionDeadlineMs));
    const gw = msg.gateway;
    if (gw && gw.baseUrl && gw.token) {
      run.gateway = { baseUrl: gw.baseUrl.replace(/\/+$/, ""), token: gw.token, expiresAtMs: Number(gw.expiresAtMs), model: gw.model };
    }
    table.add(run);
    session.run = run;
    session.lastUsed = Date.now();
    deps.onCapacity();
    logger.info({ runId: run.id, session: session.key, mode, gateway: run.gateway !== undefined }, "run starting");
    void driveRun(run, msg.prompt).catch((err: unknown) => {
      logger.error({ err, runId: run.id }, "run driver failed");
      finishRun(run);
    });
  }

  async function driveRun(run: Run, prompt: string): Promise<void> {
    const agent = await agentFor(run);
    if (!agent) return finishRun(run);
    if (run.cancelCause) {
      emit(run, { case: "runEnded", value: { cancelled: true, deadline: run.cancelCause === "deadline" || run.cancelCause === "duration" } });
      return finishRun(run);
    }
    await applyMode(run, agent);
    if (run.cancelCause || agent.dead) {
      if (agent.dead) emit(run, { case: "turnFailed", value: turnFailed(Reason.TURN_FAILED, `the agent process ${agent.exitInfo ?? "ended"} before the turn`, true) });
      else emit(run, { case: "runEnded", value: { cancelled: true, deadline: false } });
      return finishRun(run);
    }
    await promptTurn(run, agent, prompt);
    finishRun(run);
  }

  /** The session's agent, started if need be; undefined when it could not be (the run's outcome is emitted). */
  async function agentFor(run: Run): Promise<AgentInstance | undefined> {
    const session = run.session;
    try {
      return await pool.ensureAgent(session, run.gateway ? { model: run.gateway.model } : undefined);
    } catch (err) {
      const timeout = err instanceof AgentStartError && err.timeout;
      const message = clip(err instanceof Error ? err.message : String(err), 800);
      // The reason (with the tail of the agent's stderr) is logged at info level and sent to the client.
      logger.info({ runId: run.id, session: session.key, reason: message }, timeout ? "agent start budget exceeded" : "agent failed to start");
      if (run.cancelCause) emit(run, { case: "runEnded", value: { cancelled: true, deadline: false } });
      else if (err instanceof AgentCapReached) emit(run, { case: "rejected", value: rejected(Reason.HOST_BUSY, err.message) });
      else
        emit(run, {
          case: "rejected",
          value: timeout
            ? rejected(Reason.TIMEOUT, `the agent did not start within its start budget${message.includes("stderr") ? ` (${message})` : ""}`)
            : rejected(Reason.TURN_FAILED, `the agent could not be started: ${message}`),
        });
      return undefined;
    }
  }

  /** Puts the agent's session in the profile's mode for the run's approval mode (best effort). */
  async function applyMode(run: Run, agent: AgentInstance): Promise<void> {
    const wantMode = run.mode === "manual" ? profile.modes?.manual : profile.modes?.selfDrive;
    if (!wantMode || wantMode === agent.currentModeId || !agent.availableModes.has(wantMode)) return;
    try {
      await agent.conn.agent.request(acpRuntime().methods.agent.session.setMode, { sessionId: agent.acpSessionId, modeId: wantMode });
      agent.currentModeId = wantMode;
    } catch (err) {
      logger.warn({ runId: run.id, err }, "session/set_mode failed; continuing in the agent's current mode");
    }
  }

  /** The prompt turn: Started, then the agent's output (through the ACP client), then the run's last events. */
  async function promptTurn(run: Run, agent: AgentInstance, prompt: string): Promise<void> {
    run.costAtStart = agent.lastCost;
    run.state = "streaming";
    const promptDone = agent.conn.agent.request(acpRuntime().methods.agent.session.prompt, {
      sessionId: agent.acpSessionId,
      prompt: [{ type: "text", text: prompt }],
      // The run's model (the built-in agent uses it for its chat completions call); other agents ignore it.
      ...(run.gateway?.model ? { _meta: { portico: { model: run.gateway.model } } } : {}),
    });
    emit(run, { case: "started", value: {} });
    if (agent.restoreNote) {
      // The caller's earlier conversation is gone on the agent's side: the stream says so (as reasoning, not answer text).
      emit(run, { case: "reasoning", value: { text: `${agent.restoreNote}\n` } });
      agent.restoreNote = undefined;
    }
    if (agent.model) control.reportModel(run, agent.model);
    run.durationTimer = setTimeout(() => control.cancel(run, "duration"), limits.maxRunDurationMs);
    run.durationTimer.unref();
    try {
      const res = await promptDone;
      const deadline = run.cancelCause === "deadline" || run.cancelCause === "duration";
      // Every ending carries the usage the agent reported for the turn (tokens, or its cost so far).
      reportTurnUsage(run, agent, res);
      // RunEnded only for a cancel Portico asked for; an agent that ends its own turn as "cancelled"
      // (codex on reject_once) ended the turn normally: TurnEnded carries its stop reason.
      if (run.cancelCause) {
        emit(run, { case: "runEnded", value: { cancelled: true, deadline } });
      } else {
        emit(run, { case: "turnEnded", value: { stopReason: res.stopReason } });
      }
    } catch (err) {
      const deadline = run.cancelCause === "deadline" || run.cancelCause === "duration";
      reportTurnUsage(run, agent, undefined);
      if (run.cancelCause) {
        emit(run, { case: "runEnded", value: { cancelled: true, deadline } });
      } else if (agent.dead || agent.conn.signal.aborted) {
        await Promise.race([agent.channel.exited, new Promise((r) => setTimeout(r, 200))]);
        emit(run, {
          case: "turnFailed",
          value: turnFailed(Reason.TURN_FAILED, `the agent process ${agent.exitInfo ?? "closed its connection"} during the turn`, true),
        });
      } else {
        emit(run, {
          case: "turnFailed",
          value: turnFailed(Reason.TURN_FAILED, `the agent failed the turn: ${acpErrorText(err)}`, false),
        });
      }
    }
  }

  /** `promptResult`: the session/prompt result (its usage or `_meta.quota`); undefined when the turn failed. */
  function reportTurnUsage(run: Run, agent: AgentInstance, promptResult: unknown): void {
    const costDelta = agent.lastCost !== undefined ? agent.lastCost - (run.costAtStart ?? 0) : undefined;
    const usage = usageFromTurn(promptResult, costDelta);
    if (usage) emit(run, { case: "usage", value: usage });
  }

  return { startRun };
}
