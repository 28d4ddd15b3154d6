/**
 * The ACP client side of the intern host: the handlers an agent calls (session/update,
 * session/request_permission, terminal/*, fs/*), built per session. They turn what the agent says into
 * run events and questions through {@link RunControl}, the engine's narrow surface for them; driving runs
 * (start, prompt, cancel, finish, the link) is in run-driver.ts, run-control.ts and link-state.ts.
 */
import { randomUUID } from "node:crypto";
import type * as acp from "@agentclientprotocol/sdk";
import type { Logger } from "pino";
import { acpRuntime } from "./acp-runtime.js";
import { agentLaunch, type AgentFolders } from "./agent-env.js";
import type { AgentInstance } from "./agent-session.js";
import type { EventInit } from "./event-queue.js";
import { readConfinedText, writeConfinedText, type Confinement } from "./file-access.js";
import { modelFromSessionState, offeredKinds, operationForToolKind, requestedTool, selfDriveOptionId, usdCost, type OfferedOption } from "./mapping.js";
import type { AgentProfile } from "./options.js";
import type { PendingQuestion } from "./questions.js";
import type { Run, Session } from "./run.js";
import type { TerminalManager } from "./terminals.js";

/** What the client handlers may do to runs; the engine wires it from run-table.ts, run-control.ts and run-questions.ts. */
export interface RunControl {
  /** The session's run unless it is done. */
  activeRunOf(session: Session): Run | undefined;
  /** Queues an event of the run for the link. */
  emit(run: Run, ev: EventInit): void;
  /** The agent reported its model: a model event when it changed. */
  reportModel(run: Run, model: string): void;
  /** Presents a question (the run pauses) or fails the run when the host holds too many paused runs. */
  present(run: Run, q: PendingQuestion): void;
  /** Running/paused counts changed. */
  onCapacity(): void;
}

export interface AcpClientDeps {
  profile: AgentProfile;
  logger: Logger;
  folders: AgentFolders;
  runAs: { uid: number; gid: number } | undefined;
  bwrap: string | undefined;
  runs: RunControl;
}

/** The client app factory the agent pool connects each agent process to. */
export function createAcpClient(deps: AcpClientDeps): (session: Session, agentRef: () => AgentInstance) => acp.ClientApp {
  const { profile, logger, folders, runs } = deps;

  function buildClientApp(session: Session, agentRef: () => AgentInstance): acp.ClientApp {
    const app = acpRuntime().client({ name: "portico-intern-host" });
    app.onNotification(acpRuntime().methods.client.session.update, ({ params }) => onUpdate(session, agentRef(), params));
    app.onRequest(acpRuntime().methods.client.session.requestPermission, ({ params, signal }) => onPermission(session, agentRef(), params, signal));
    if (profile.offerTerminal ?? true) {
      const terms = (): TerminalManager => agentRef().terminals;
      app.onRequest(acpRuntime().methods.client.terminal.create, ({ params }) => createTerminal(session, agentRef(), params));
      app.onRequest(acpRuntime().methods.client.terminal.output, ({ params }) => terms().output(params.terminalId));
      app.onRequest(acpRuntime().methods.client.terminal.waitForExit, ({ params, signal }) => terms().waitForExit(params.terminalId, signal));
      app.onRequest(acpRuntime().methods.client.terminal.kill, ({ params }) => {
        terms().kill(params.terminalId);
        return {};
      });
      app.onRequest(acpRuntime().methods.client.terminal.release, ({ params }) => {
        terms().release(params.terminalId);
        return {};
      });
    }
    if (profile.offerFs ?? true) {
      app.onRequest(acpRuntime().methods.client.fs.readTextFile, ({ params }) => readConfinedText(confinement(session), params));
      app.onRequest(acpRuntime().methods.client.fs.writeTextFile, ({ params }) => {
        writeConfinedText(confinement(session), params, deps.runAs);
        return {};
      });
    }
    return app;
  }

  /** fs access is confined to the working folder unless the run is self-drive as a normal user. */
  function confinement(session: Session): Confinement {
    const run = runs.activeRunOf(session);
    return { root: session.cwd, unconfined: run?.mode === "self-drive" && !deps.runAs && profile.sandbox !== "process" };
  }

  function onUpdate(session: Session, agent: AgentInstance, params: acp.SessionNotification): void {
    agent.lastUpdateAt = Date.now();
    if (agent.suppressUpdates || params.sessionId !== agent.acpSessionId) return;
    const u = params.update;
    const run = runs.activeRunOf(session);
    switch (u.sessionUpdate) {
      case "agent_message_chunk":
      case "agent_thought_chunk": {
        let text = "";
        if (u.content.type === "text") text = u.content.text;
        else if (u.content.type === "resource_link") text = `[${u.content.name}](${u.content.uri})`;
        if (!text || !run || run.state === "starting") return;
        runs.emit(run, u.sessionUpdate === "agent_message_chunk" ? { case: "content", value: { text } } : { case: "reasoning", value: { text } });
        return;
      }
      case "tool_call":
      case "tool_call_update":
        if (u.kind) agent.toolKinds.set(u.toolCallId, u.kind);
        if (agent.toolKinds.size > 1000) {
          const first = agent.toolKinds.keys().next().value;
          if (first !== undefined) agent.toolKinds.delete(first);
        }
        if (run && (u.status === "completed" || u.status === "failed")) run.escalation.toolCallEnded(u.toolCallId);
        return;
      case "current_mode_update":
        agent.currentModeId = u.currentModeId;
        return;
      case "config_option_update": {
        const model = modelFromSessionState({ configOptions: u.configOptions });
        if (model) {
          agent.model = model;
          if (run && run.state === "streaming") runs.reportModel(run, model);
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

  function onPermission(
    session: Session,
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
        toolCallId: tc.toolCallId,
        rawInput: tc.rawInput,
        options,
        kinds: offeredKinds(options),
        operation: operationForToolKind(kind),
        tool: requestedTool(tc, kind),
        settle: (outcome) => {
          if (q.timer) clearTimeout(q.timer);
          signal.removeEventListener("abort", onAbort);
          resolveAnswer({ outcome });
        },
      };
      const onAbort = (): void => {
        if (run.questions.remove(q)) runs.onCapacity();
        q.settle({ outcome: "cancelled" });
      };
      signal.addEventListener("abort", onAbort, { once: true });
      if (run.questions.add(q)) runs.present(run, q);
    });
  }

  function createTerminal(session: Session, agent: AgentInstance, params: acp.CreateTerminalRequest): acp.CreateTerminalResponse {
    const run = runs.activeRunOf(session);
    const mode = run?.mode ?? "manual";
    let sandboxed = (profile.sandbox ?? "terminal") !== "none" && mode === "manual";
    // Sealed escalation: only the command an approved, still open tool call named runs unsandboxed.
    if (sandboxed && run && run.escalation.consume(params, session.cwd)) sandboxed = false;
    if (sandboxed && !deps.bwrap) {
      throw acpRuntime().RequestError.internalError({ reason: "sandbox_unavailable" }, "manual mode refuses shell commands: bubblewrap (bwrap) is not installed on the intern host");
    }
    const res = agent.terminals.create(params, {
      cwd: session.cwd,
      // Commands get the agent's variables without the model gateway's (placeholders empty, no family).
      env: agentLaunch(profile, folders.homeDir, session.cwd, undefined).env,
      bwrap: sandboxed ? deps.bwrap : undefined,
      writable: [session.cwd],
      runAs: deps.runAs,
    });
    logger.debug({ session: session.key, runId: run?.id, sandboxed: res.sandboxed }, "terminal created");
    return { terminalId: res.terminalId };
  }

  return buildClientApp;
}
