/**
 * Admission of a new run: the host's capacity and this key's share of paused runs, the session's turn
 * lock, the run row, then StartRun on the link. The response opens at once; a start failure after that
 * reaches the client as an error finish on the open stream.
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { ApprovalMode, CancelReason, type ModelGateway, type RunRejected } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { Intern } from "../../db/prisma.js";
import { errorDetailOf } from "../errors.js";
import { ALL_REASONS, Reason, reasonFromWire, ruleOf } from "../../contract/reasons.js";
import { hostBusy, internError, internTimeout, internUnreachable, keyShareUsed, sessionBusy } from "./intern-errors.js";
import { TERMINAL_RUN_STATES, type RunState } from "./intern-repository.js";
import { ActiveRun } from "./active-run.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";
import type { Caller } from "../auth.js";

/** How much later than the core's deadline the host's backstop deadline fires. */
const HOST_BACKSTOP_GRACE_MS = 2_000;
/** Retry-After for 503 busy (the host is at capacity). */
export const HOST_BUSY_RETRY_AFTER_S = 5;
/** HTTP status of a start failure reason in the finish chunk. */

export interface StartRunInput {
  intern: Intern;
  sessionKey: string | undefined;
  prompt: string;
  approvalMode: "manual" | "self-drive";
  /** Hash of the caller's API key: the per-key share of runs held across a question. */
  callerKey?: string;
  /** The caller's API key: the run's model credential (run-credentials.ts) acts as it. */
  caller?: Pick<Caller, "keyId" | "keyHash" | "organizationId" | "workspaceId">;
  signal: AbortSignal;
}

/**
 * The reason of a host's refusal: its `reason_value`, or for a host of an earlier version (the wire
 * string only) the reason that names: busy → host_busy, timeout, anything else turn_failed.
 */
export function rejectedReason(r: Pick<RunRejected, "reason" | "reasonValue">): Reason {
  if (ALL_REASONS.includes(r.reasonValue)) return r.reasonValue;
  if (r.reason === "busy") return Reason.HOST_BUSY;
  if (r.reason === "timeout") return Reason.TIMEOUT;
  return Reason.TURN_FAILED;
}

/** The error a host's refusal to start a run becomes. */
export function rejectedError(r: RunRejected): ConnectError {
  const reason = rejectedReason(r);
  if (reason === Reason.HOST_BUSY) return hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "runs", hostMessage: r.message });
  if (reason === Reason.TIMEOUT) return internTimeout();
  return internError("turn_failed", r.message || "The intern could not start the run.", true);
}

export function createRunAdmission(ctx: RunContext, lifecycle: RunLifecycle) {
  const { repo, links, config, log, runs } = ctx;

  /** Manual runs one key may hold open on a host that holds `hostPaused` paused runs (0: unbounded). */
  function keyShare(hostPaused: number): number {
    if (config.maxPausedRunsPerKey > 0) return config.maxPausedRunsPerKey;
    return hostPaused > 0 ? Math.max(1, Math.floor(hostPaused / 2)) : Number.POSITIVE_INFINITY;
  }

  async function takeTurnLock(sessionRowId: string, runId: string): Promise<void> {
    if (await lifecycle.lockTurn(sessionRowId, runId)) return;
    const session = await repo.findSession(sessionRowId);
    const holderId = session?.activeRunId;
    if (holderId) {
      const holder = await repo.findRun(holderId);
      if (holder && TERMINAL_RUN_STATES.includes(holder.state as RunState)) {
        // A stale lock (its process ended without releasing it): take it over.
        await lifecycle.releaseStaleLock(sessionRowId, holderId);
        if (await lifecycle.lockTurn(sessionRowId, runId)) return;
      }
      const active = runs.get(holderId);
      if (active?.interaction) {
        const left = Math.ceil((active.interaction.deadlineAt.getTime() - Date.now()) / 1000);
        throw sessionBusy(Math.max(1, left));
      }
    }
    throw sessionBusy(1);
  }

  async function startRun(input: StartRunInput): Promise<ActiveRun> {
    const { intern } = input;
    const link = links.get(intern.id);
    if (!link) throw internUnreachable();
    if (link.capacity.busy) throw hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "runs" });
    let running = 0;
    let paused = 0;
    let heldByKey = 0;
    for (const r of runs.values()) {
      if (r.link !== link) continue;
      running++;
      if (r.state === "paused") paused++;
      if (input.callerKey !== undefined && r.callerKey === input.callerKey && r.approvalMode === "manual") heldByKey++;
    }
    if (input.approvalMode === "manual" && heldByKey >= keyShare(link.hello.maxPausedRuns)) {
      // This key's share of runs held across a question is used up; other keys keep theirs.
      throw keyShareUsed(HOST_BUSY_RETRY_AFTER_S);
    }
    if (link.hello.maxConcurrentRuns > 0 && running >= link.hello.maxConcurrentRuns) {
      throw hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "runs", running, max: link.hello.maxConcurrentRuns });
    }
    if (input.approvalMode === "manual" && link.hello.maxPausedRuns > 0 && paused >= link.hello.maxPausedRuns) {
      throw hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "paused", paused });
    }

    const runId = randomUUID();
    const sessionKey = input.sessionKey ?? randomUUID();
    let session: { id: string };
    if (input.sessionKey === undefined) {
      session = await lifecycle.newLockedSession(intern.id, sessionKey, runId);
    } else {
      session = await repo.ensureSession(intern.id, sessionKey);
      await takeTurnLock(session.id, runId);
    }
    await lifecycle.recordStart({ id: runId, internId: intern.id, sessionId: session.id, sessionKey, approvalMode: input.approvalMode });
    // The intern's model calls go through Portico (docs/interns.md, "Model calls through Portico"): the
    // intern has a model and this core knows the gateway's address. The run's credential is written before
    // StartRun leaves, so the agent's first call finds it on any instance.
    let gateway: ModelGateway | undefined;
    const gatewayUrl = ctx.gatewayUrl();
    if (intern.configuredModel && gatewayUrl && input.caller && ctx.credentials) {
      try {
        const { token, expiresAt } = await ctx.credentials.mint({
          runId,
          internId: intern.id,
          sessionId: session.id,
          sessionKey,
          organizationId: input.caller.organizationId,
          workspaceId: input.caller.workspaceId,
          keyId: input.caller.keyId,
          keyHash: input.caller.keyHash,
          model: intern.configuredModel,
        });
        gateway = {
          $typeName: "portico.internlink.v1.ModelGateway",
          baseUrl: gatewayUrl,
          token,
          expiresAtMs: BigInt(expiresAt.getTime()),
          model: intern.configuredModel,
        };
      } catch (err) {
        await lifecycle.endUnsent({ id: runId, sessionId: session.id }, { on: "startFailed", reason: "turn_failed", clientGone: false });
        throw err;
      }
    }
    const run = new ActiveRun(runId, intern.id, session.id, sessionKey, input.approvalMode);
    lifecycle.admitted(run, { link, model: intern.model ?? "", callerKey: input.callerKey, throughGateway: gateway !== undefined });

    const started = new Promise<void>((resolve, reject) => (run.startWaiter = { resolve, reject }));
    const timer = setTimeout(() => run.startWaiter?.reject(internTimeout()), config.startTimeoutMs);
    const onAbort = () => run.startWaiter?.reject(new ConnectError("the client went away", Code.Canceled));
    input.signal.addEventListener("abort", onAbort, { once: true });
    if (input.signal.aborted) onAbort();
    const sent = link.startRun({
      runId,
      sessionId: sessionKey,
      prompt: input.prompt,
      approvalMode: input.approvalMode === "manual" ? ApprovalMode.MANUAL : ApprovalMode.SELF_DRIVE,
      // The host's own backstop fires only if the core could not (link down): later than ours.
      interactionDeadlineMs: BigInt(config.interactionDeadlineMs + config.linkLivenessTimeoutMs + HOST_BACKSTOP_GRACE_MS),
      ...(gateway ? { gateway } : {}),
    });
    if (!sent) run.startWaiter?.reject(internUnreachable());
    // The run is accepted: the response opens now (role chunk) while the host starts the agent; a
    // start failure from here on reaches the client as an error finish on the open stream.
    void (async () => {
      try {
        await started;
      } catch (err) {
        const ce = ConnectError.from(err);
        const detail = errorDetailOf(ce);
        // What the stream shows: the error's reason in the one table (its status and wire string follow).
        const failure = (detail && reasonFromWire(detail.reason, ce.code)) ?? Reason.TURN_FAILED;
        const endReason = ce.code === Code.Canceled ? "client_disconnected" : ruleOf(failure).wire;
        if (ce.code === Code.Canceled) link.cancelRun(runId, CancelReason.CLIENT_DISCONNECTED);
        else if (failure === Reason.TIMEOUT) link.cancelRun(runId, CancelReason.OPERATOR);
        await lifecycle.end(run, { on: "startFailed", reason: endReason, failure, clientGone: ce.code === Code.Canceled });
        if (ce.code !== Code.Canceled) {
          run.push({ kind: "startFailed", reason: failure, message: ce.rawMessage, retryable: detail?.retryable ?? true });
        }
      } finally {
        clearTimeout(timer);
        input.signal.removeEventListener("abort", onAbort);
        run.startWaiter = undefined;
      }
    })().catch((err: unknown) => log.error({ err, runId }, "could not record a run's failed start"));
    return run;
  }

  return { startRun };
}
