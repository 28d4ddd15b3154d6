/**
 * TLS of the host link: with an https core URL the host verifies the core's certificate against
 * the system CAs or a given CA bundle (PEM). The embedded host of `portico serve` pins the core's
 * own certificate instead (it dials the loopback address, which the certificate need not name).
 */
import { X509Certificate } from "node:crypto";
import type { SecureClientSessionOptions } from "node:http2";
import type { PeerCertificate } from "node:tls";

export interface HostTlsOptions {
  /** CA certificates (PEM) that sign the core's certificate; default: the system CAs. */
  ca?: string | Buffer | undefined;
  /** Trust exactly this certificate (PEM), whatever names it carries (embedded host on loopback). */
  pinnedCert?: string | Buffer | undefined;
}

/** HTTP/2 session options for dialing `url`; throws when TLS settings are given for a cleartext URL. */
export function coreSessionOptions(url: string, tls: HostTlsOptions | undefined): SecureClientSessionOptions | undefined {
  const secure = new URL(url).protocol === "https:";
  if (!secure) {
    if (tls?.ca || tls?.pinnedCert) throw new Error(`a CA file is given but the core URL ${url} is not https`);
    return undefined;
  }
  if (tls?.pinnedCert) {
    const pinned = new X509Certificate(tls.pinnedCert).fingerprint256;
    return {
      ca: tls.pinnedCert,
      allowPartialTrustChain: true,
      minVersion: "TLSv1.2",
      checkServerIdentity: (_host: string, cert: PeerCertificate) =>
        cert.fingerprint256 === pinned ? undefined : new Error("the core's certificate is not the pinned one"),
    } as SecureClientSessionOptions;
  }
  return { ...(tls?.ca ? { ca: tls.ca } : {}), minVersion: "TLSv1.2" };
}
