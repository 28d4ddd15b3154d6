/**
 * The web console: static files (plain ES modules and CSS, no build step) under /console/, served by
 * @fastify/static from src/console. The console is a client of the public API like any other: it
 * signs in with a management key kept in the browser's sessionStorage and calls /api/v1 with it.
 * Every console response carries a strict Content-Security-Policy (scripts, styles and connections
 * from this origin only; no inline script or style) and the usual hardening headers.
 */
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";

export const CONSOLE_PREFIX = "/console";

/** Where the console's files live: src/console, reached from src/gateway/routes and from the compiled dist/gateway/routes alike. */
export const CONSOLE_ROOT = fileURLToPath(new URL("../../../src/console/", import.meta.url));

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
  // Always revalidated (ETag), so a new version of the console is picked up at once.
  "cache-control": "no-cache",
};

export async function registerConsoleRoutes(app: FastifyInstance): Promise<void> {
  await app.register(
    async (scope) => {
      scope.addHook("onSend", async (_req, reply, payload) => {
        reply.headers(SECURITY_HEADERS);
        return payload;
      });
      scope.get(CONSOLE_PREFIX, { schema: { hide: true } }, async (_req, reply) => reply.redirect(`${CONSOLE_PREFIX}/`, 301));
      // The service's root leads a browser to the console (302: the root may serve something else one day).
      scope.get("/", { schema: { hide: true } }, async (_req, reply) => reply.redirect(`${CONSOLE_PREFIX}/`, 302));
      await scope.register(fastifyStatic, {
        root: CONSOLE_ROOT,
        prefix: `${CONSOLE_PREFIX}/`,
        index: "index.html",
        cacheControl: false,
        // A dot-file is answered like a file that does not exist (404 in the envelope), not 403.
        dotfiles: "ignore",
        schemaHide: true,
      });
    },
  );
}
