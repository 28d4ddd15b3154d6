/**
 * gRPC clients to other core processes, one pooled HTTP/2 session per URL, for StreamChat calls
 * forwarded to the process that holds an intern's link (see cluster.ts). An https URL is verified
 * with Node's CAs (system store plus NODE_EXTRA_CA_CERTS).
 */
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { InternsService } from "../../gen/portico/interns/v1/interns_service_pb.js";

/** Header marking a forwarded call: its receiver serves it locally or fails, never forwards again. */
export const FORWARDED_HEADER = "x-portico-forwarded-by";

export interface Forwarder {
  client(url: string): Client<typeof InternsService>;
  close(): void;
}

export function createForwarder(): Forwarder {
  const peers = new Map<string, { client: Client<typeof InternsService>; session: Http2SessionManager }>();
  return {
    client(url) {
      let peer = peers.get(url);
      if (!peer) {
        const session = new Http2SessionManager(url, { pingIntervalMs: 5_000, pingTimeoutMs: 5_000, idleConnectionTimeoutMs: 60_000 });
        peer = { client: createClient(InternsService, createGrpcTransport({ baseUrl: url, sessionManager: session })), session };
        peers.set(url, peer);
      }
      return peer.client;
    },
    close() {
      for (const p of peers.values()) p.session.abort();
      peers.clear();
    },
  };
}
