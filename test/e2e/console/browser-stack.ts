/**
 * The stack the console's browser tests drive: a real `portico serve` on a fresh SQLite data folder (with
 * the embedded intern host), and Debian's Chromium through playwright-core with its own profile. Waits
 * for output lines and events, never for time.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { serveWithBanner, type ServeBanner } from "../../helpers/cli.js";

export const CHROMIUM = "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface Served extends ServeBanner {
  dataDir: string;
}

/** `portico serve` on a new data folder; `env` adds settings (providers, …). */
export async function serve(env: Record<string, string> = {}): Promise<Served> {
  const dataDir = mkdtempSync(join(tmpdir(), "portico-console-"));
  return { ...(await serveWithBanner({ PORTICO_DATA_DIR: dataDir, ...env })), dataDir };
}

export async function stopServe(s: Served | undefined): Promise<void> {
  if (!s) return;
  if (s.child.exitCode === null && s.child.signalCode === null) {
    const exited = new Promise((r) => s.child.once("exit", r));
    s.child.kill("SIGTERM");
    await exited;
  }
  rmSync(s.dataDir, { recursive: true, force: true });
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console errors and page errors seen so far (expected ones filtered by `expected`). */
  problems: string[];
  close(): Promise<void>;
}

export async function launch(expected: string[] = []): Promise<Browser> {
  const profileDir = mkdtempSync(join(tmpdir(), "portico-chromium-"));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1200, height: 820 },
    locale: "en-GB",
    timezoneId: "UTC",
  });
  context.setDefaultTimeout(60_000);
  const problems: string[] = [];
  const watch = (p: Page) => {
    p.on("console", (m) => {
      if (m.type() === "error" && !expected.some((t) => m.text().includes(t))) problems.push(`console error: ${m.text()}`);
    });
    p.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  };
  const page = context.pages()[0] ?? (await context.newPage());
  context.on("page", watch);
  watch(page);
  return {
    context,
    page,
    problems,
    async close() {
      await context.close();
      rmSync(profileDir, { recursive: true, force: true });
    },
  };
}

/** Opens the console in `page` and signs in with `key`. */
export async function signIn(page: Page, origin: string, key: string): Promise<void> {
  await page.goto(`${origin}/console/`);
  await page.getByLabel("Management key").fill(key);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { level: 1, name: "Key" }).waitFor();
}
