/**
 * The SSRF-guarded fetch of the web_fetch server tool (docs/plugins.md, "Web fetch safety"). A URL a model or
 * a caller supplies can only make Portico connect to public unicast addresses, or to the addresses the operator
 * allows (PORTICO_WEB_FETCH_ALLOW_ADDRESSES):
 *
 * - only `http:` and `https:`; no credentials in the URL;
 * - an address literal in the URL is classified here (Node connects to a literal without a lookup);
 * - a host name is resolved once, inside the HTTP client's own `connect.lookup` (undici Agent), and every
 *   address it resolves to must pass, so the address checked is the address connected to (a rebinding answer
 *   cannot slip past); IPv4-mapped IPv6 addresses are unwrapped first;
 * - redirects are followed by hand, at most 5, each hop checked again (scheme, address, domain filters);
 * - a time bound over the whole fetch, a body byte cap, a content-type allow-list; no proxy variables are read.
 *
 * ipaddr.js classifies addresses: only its `unicast` range is public (loopback, private, link-local and the
 * 169.254.169.254 metadata address, carrier-grade NAT, unique-local, reserved, 6to4/Teredo/NAT64 are not).
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import type { Agent, Dispatcher } from "undici";
import { onFirstUse } from "../../../lib/on-first-use.js";

/** undici (≈ 5 MB of heap once loaded) is loaded with the first fetched page or search, not at start-up. */
export const undici = onFirstUse([import.meta.resolve("undici")], () => import("undici"));

/** A fetch the guard refused or that failed; `message` is safe to show to the model and the caller. */
export class FetchRefused extends Error {}

/** `dns.lookup`'s shape (tests inject a fake resolver). */
export type LookupFn = (hostname: string, options: { all: true }, cb: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

export interface GuardOptions {
  /** Addresses and CIDR ranges allowed beside public unicast (operator setting). */
  allowAddresses: readonly string[];
  maxBytes: number;
  timeoutMs: number;
  maxRedirects?: number;
  /** Host filters of the request (web_fetch `allowed_domains` / `blocked_domains`): a domain matches itself and its subdomains. */
  allowedDomains?: readonly string[];
  blockedDomains?: readonly string[];
  /** Default: the system resolver (`dns.lookup`). */
  lookup?: LookupFn;
}

export interface FetchedPage {
  url: string;
  finalUrl: string;
  status: number;
  contentType: string;
  body: Buffer;
  /** The body was longer than the byte cap and was cut. */
  truncated: boolean;
}

/** The content types fetched; others are refused (an image, an archive, a binary). */
const CONTENT_TYPES = [/^text\//, /^application\/(xhtml\+xml|xml|json|ld\+json|rss\+xml|atom\+xml)$/];

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

function parseAllow(list: readonly string[]): Range[] {
  return list.map((item) => {
    if (item.includes("/")) return ipaddr.parseCIDR(item) as Range;
    const addr = ipaddr.parse(item);
    return [addr, addr.kind() === "ipv4" ? 32 : 128] as Range;
  });
}

function unwrap(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed;
}

/** Whether an address may be connected to: public unicast, or inside the operator's allow list. */
export function addressAllowed(address: string, allow: readonly Range[]): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = unwrap(address);
  } catch {
    return false;
  }
  for (const [net, bits] of allow) {
    const n = net.kind() === "ipv6" && (net as ipaddr.IPv6).isIPv4MappedAddress() ? (net as ipaddr.IPv6).toIPv4Address() : net;
    if (n.kind() === addr.kind() && addr.match(n as never, bits)) return true;
  }
  return addr.range() === "unicast";
}

export function hostMatches(host: string, domain: string): boolean {
  const d = domain.trim().toLowerCase().replace(/^\*\./, "").replace(/\.$/, "");
  const h = host.toLowerCase().replace(/\.$/, "");
  return d !== "" && (h === d || h.endsWith(`.${d}`));
}

/** A guarded fetcher: one undici Agent whose connections are checked in its own lookup. */
export function createGuardedFetcher(base: Omit<GuardOptions, "allowedDomains" | "blockedDomains">) {
  const allow = parseAllow(base.allowAddresses);
  const resolve: LookupFn = base.lookup ?? ((hostname, options, cb) => dnsLookup(hostname, options, cb));
  // The agent is made with the first page (undici is loaded then); `close` before any page has nothing to close.
  let agent: Agent | undefined;
  const makeAgent = (Agent: typeof import("undici").Agent) =>
    new Agent({
      connect: {
        // Node calls this for host names only; `options.all` depends on its family auto-selection.
        lookup(hostname: string, options: { all?: boolean }, cb: (...args: unknown[]) => void) {
          resolve(hostname, { all: true }, (err, addresses) => {
            if (err) return cb(err);
            const refused = addresses.find((a) => !addressAllowed(a.address, allow));
            if (refused || addresses.length === 0) {
              return cb(new FetchRefused(`${hostname} resolves to an address web_fetch may not connect to (private, loopback, link-local or otherwise not public)`));
            }
            if (options.all) cb(null, addresses);
            else cb(null, addresses[0]!.address, addresses[0]!.family);
          });
        },
      } as never,
      headersTimeout: base.timeoutMs,
      bodyTimeout: base.timeoutMs,
      // Pages are fetched once; an idle connection is not kept for long (nor does it keep a stopping process up long).
      keepAliveTimeout: 1_000,
      keepAliveMaxTimeout: 1_000,
    });

  function checkUrl(raw: string, opts: GuardOptions): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new FetchRefused(`"${raw.slice(0, 200)}" is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new FetchRefused(`only http and https URLs are fetched, not ${url.protocol}`);
    if (url.username || url.password) throw new FetchRefused("URLs with credentials are not fetched");
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (isIP(host) !== 0) {
      if (!addressAllowed(host, allow)) throw new FetchRefused(`${host} is an address web_fetch may not connect to (private, loopback, link-local or otherwise not public)`);
    }
    // (The URL parser already turns odd IPv4 spellings such as `2130706433` or `0x7f.1` into 127.0.0.1.)
    if (opts.blockedDomains?.some((d) => hostMatches(host, d))) throw new FetchRefused(`${host} is in blocked_domains`);
    if (opts.allowedDomains && opts.allowedDomains.length > 0 && !opts.allowedDomains.some((d) => hostMatches(host, d))) {
      throw new FetchRefused(`${host} is not in allowed_domains`);
    }
    return url;
  }

  async function fetchPage(raw: string, filters: Pick<GuardOptions, "allowedDomains" | "blockedDomains"> = {}, signal?: AbortSignal): Promise<FetchedPage> {
    const opts: GuardOptions = { ...base, ...filters };
    const maxRedirects = base.maxRedirects ?? 5;
    let url = checkUrl(raw, opts);
    const { Agent, request } = await undici();
    agent ??= makeAgent(Agent);
    const timeout = AbortSignal.timeout(base.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    for (let hop = 0; ; hop++) {
      let res: Dispatcher.ResponseData;
      try {
        res = await request(url, {
          dispatcher: agent,
          method: "GET",
          signal: both,
          headers: { accept: "text/html, text/plain, text/markdown, application/xhtml+xml, application/json;q=0.9, */*;q=0.1", "user-agent": "Portico-web_fetch/1" },
        });
      } catch (err) {
        throw refusalOf(err, timeout.aborted, base.timeoutMs);
      }
      if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location) {
        await res.body.dump().catch(() => undefined);
        if (hop >= maxRedirects) throw new FetchRefused(`more than ${maxRedirects} redirects`);
        const location = Array.isArray(res.headers.location) ? res.headers.location[0]! : res.headers.location;
        url = checkUrl(new URL(location, url).toString(), opts);
        continue;
      }
      const contentType = String(res.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
      if (contentType !== "" && !CONTENT_TYPES.some((re) => re.test(contentType))) {
        await res.body.dump().catch(() => undefined);
        throw new FetchRefused(`the page's content type ${contentType} is not fetched (text, HTML, XML and JSON are)`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      try {
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          if (size + chunk.length > base.maxBytes) {
            chunks.push(chunk.subarray(0, base.maxBytes - size));
            size = base.maxBytes;
            truncated = true;
            break;
          }
          chunks.push(chunk);
          size += chunk.length;
        }
      } catch (err) {
        throw refusalOf(err, timeout.aborted, base.timeoutMs);
      } finally {
        if (truncated) res.body.destroy();
      }
      return { url: raw, finalUrl: url.toString(), status: res.statusCode, contentType, body: Buffer.concat(chunks), truncated };
    }
  }

  return { fetchPage, close: async () => agent?.close() };
}

export type GuardedFetcher = ReturnType<typeof createGuardedFetcher>;

function refusalOf(err: unknown, timedOut: boolean, timeoutMs: number): FetchRefused {
  if (err instanceof FetchRefused) return err;
  const cause = (err as { cause?: unknown })?.cause;
  if (cause instanceof FetchRefused) return cause;
  if (timedOut) return new FetchRefused(`the page did not arrive within ${timeoutMs} ms`);
  const code = (err as { code?: unknown })?.code;
  return new FetchRefused(`the page could not be fetched${typeof code === "string" ? ` (${code})` : ""}`);
}
