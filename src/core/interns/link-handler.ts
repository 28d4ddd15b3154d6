/**
 * InternLinkService.Attach: the host's long-lived stream. The service is public (it bypasses the API
 * key interceptor) and authenticates the host token here; the token names the intern. One live link
 * per intern in this process: a newer link replaces an older one.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { InternChatConfig } from "../../config.js";
import { InternLinkService, type AttachRequest, type Hello } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import { Reason, serviceError, unauthenticated } from "../errors.js";
import { bearerToken, digestsEqual, hashSecret } from "../identity/keys.js";
import type { InternRepository } from "./intern-repository.js";
import { InternLink, type LinkRegistry } from "./link-registry.js";
import type { RunManager } from "./run-manager.js";
import type { Background } from "./background.js";
import type { InternCluster } from "./cluster.js";
import { internSuspended } from "./intern-admin.js";

export interface LinkHandlerDeps {
  repo: InternRepository;
  background: Background;
  links: LinkRegistry;
  manager: () => RunManager;
  cluster: InternCluster;
  /** Tokens this process issued to its own embedded host (hash → intern id), never stored. */
  localTokens: ReadonlyMap<string, string>;
  config: InternChatConfig;
  instanceId: string;
  logger: Logger;
}

/** How long a new link may take to send its Hello. */
const HELLO_TIMEOUT_MS = 10_000;

export function createInternLinkHandler(deps: LinkHandlerDeps): ServiceImpl<typeof InternLinkService> {
  const log = deps.logger.child({ component: "intern-link" });
  return {
    async *attach(requests, ctx) {
      const token = bearerToken(ctx.requestHeader.get("authorization"));
      if (!token) throw unauthenticated("Missing host token");
      const hash = hashSecret(token);
      const localIntern = deps.localTokens.get(hash);
      const intern = localIntern ? await deps.repo.findIntern(localIntern) : await deps.repo.findInternByTokenHash(hash);
      if (!intern || (!localIntern && (!intern.hostTokenHash || !digestsEqual(intern.hostTokenHash, hash)))) {
        throw unauthenticated("Invalid host token");
      }
      if (intern.suspendedAt) throw internSuspended();
      const it = requests[Symbol.asyncIterator]();
      const hello = await firstHello(it, ctx.signal);

      const manager = deps.manager();
      const link = new InternLink(
        intern.id,
        hello,
        { pingIntervalMs: deps.config.linkPingIntervalMs, livenessTimeoutMs: deps.config.linkLivenessTimeoutMs },
        {
          onRunEvent: (l, ev) => manager.onRunEvent(l, ev),
          onCapacity: () => undefined,
          onClosed: (l, reason) => {
            manager.onLinkClosed(l, reason);
            if (deps.links.remove(l)) {
              deps.cluster.dropLink(l.internId);
              deps.background.run(() => deps.repo.markDetached(l.internId, deps.instanceId));
            }
          },
        },
      );
      deps.links.register(link);
      deps.cluster.holdLink(intern.id);
      const onAbort = () => link.close("host disconnected");
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      try {
        await deps.repo.markAttached(intern.id, deps.instanceId, hello.agentName);
        const cancelRunIds = await manager.reconcile(link, hello);
        link.welcome(cancelRunIds);
        log.info(
          { internId: intern.id, agent: hello.agentName, held: hello.heldRuns.length, cancelled: cancelRunIds.length },
          "intern host attached",
        );
        // Read the host's messages in the background; the generator below writes ours.
        void (async () => {
          try {
            for (;;) {
              const r = await it.next();
              if (r.done) break;
              link.receive(r.value);
            }
            link.close("host ended the stream");
          } catch {
            link.close("host stream broke");
          }
        })();
        yield* link.messages();
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        link.close(link.closed ? link.closeReason : "link handler ended");
      }
      if (link.closeReason === "liveness timeout") {
        throw serviceError(Reason.TIMEOUT, "The host was silent past the liveness timeout.");
      }
    },
  };
}

async function firstHello(it: AsyncIterator<AttachRequest>, signal: AbortSignal): Promise<Hello> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const first = await Promise.race([
      it.next(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(serviceError(Reason.TIMEOUT, "The host did not send Hello in time.", { retryable: false })),
          HELLO_TIMEOUT_MS,
        );
        signal.addEventListener("abort", () => reject(serviceError(Reason.CANCELLED, "The host went away.")), {
          once: true,
        });
      }),
    ]);
    if (first.done || first.value.message.case !== "hello") {
      throw serviceError(Reason.BAD_REQUEST, "The first message on a link must be Hello.");
    }
    return first.value.message.value;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
