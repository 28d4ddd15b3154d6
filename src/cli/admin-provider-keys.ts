/**
 * `portico admin provider-key …`: the operator's shared provider keys (src/core/byok/provider-keys.ts).
 *
 * - `add --provider <slug> [--sort-order <n>] [--key-env <VAR>]` reads the key from standard input (or the
 *   named environment variable), never from the command line, where `ps` and shell history would keep it;
 * - `list [--provider <slug>]` shows ids, providers, masked labels and order; never a key;
 * - `disable <id>` / `enable <id>` and `remove <id>` (the sealed key is deleted with its row).
 * Running servers see a change at once when Redis is configured, otherwise within one second.
 */
import type { Command } from "commander";
import { ConnectError } from "@connectrpc/connect";
import type { Config } from "../config.js";
import { createProviderKeyAdmin, PROVIDER_KEYS_TOPIC, type ProviderKeyAdmin, type ProviderKeyInfo } from "../core/byok/provider-keys.js";
import { recordAndVerifyCheckValues } from "../core/byok/keyring-store.js";
import { servedBy } from "../core/byok/byok-module.js";
import { ProviderRegistry } from "../core/chat/providers/index.js";
import { createInvalidationBus } from "../lib/invalidation.js";
import type { AdminCommandRegistrar } from "./admin.js";
import { keyringFor } from "./admin-byok.js";
import { CliError, printJson, withDatabase } from "./shared.js";

async function withProviderKeys<T>(cfg: Config, fn: (admin: ProviderKeyAdmin) => Promise<T>): Promise<T> {
  return withDatabase(cfg, async (h) => {
    const keyring = keyringFor(cfg);
    await recordAndVerifyCheckValues(h.db, keyring);
    const bus = createInvalidationBus(cfg);
    try {
      const servesProvider = servedBy(new ProviderRegistry(cfg.providers));
      return await fn(createProviderKeyAdmin({ db: h.db, keyring, servesProvider, onChanged: () => bus.publish(PROVIDER_KEYS_TOPIC, "*") }));
    } catch (err) {
      if (err instanceof ConnectError) throw new CliError(err.rawMessage);
      throw err;
    } finally {
      await bus.close();
    }
  });
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write("provider key (end with Ctrl-D): ");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "");
}

const json = (k: ProviderKeyInfo) => ({
  id: k.id,
  provider: k.provider,
  label: k.label,
  disabled: k.disabled,
  sort_order: k.sortOrder,
  weight: k.weight,
  key_id: k.keyId,
  created_at: k.createdAt.toISOString(),
});

const line = (k: ProviderKeyInfo) => `${k.id} ${k.provider} ${k.label} order=${k.sortOrder} weight=${k.weight}${k.disabled ? " (disabled)" : ""}`;

export const registerProviderKeyAdminCommands: AdminCommandRegistrar = (admin: Command, config: () => Config) => {
  const pk = admin.command("provider-key").description("the operator's shared provider keys, used by every workspace (BYOK flags permitting)");

  pk.command("add")
    .description("add a shared provider key, read from standard input (or --key-env)")
    .requiredOption("--provider <slug>", "provider slug, e.g. openai, anthropic, google-ai-studio, or one of PORTICO_OPENAI_COMPATIBLE_PROVIDERS")
    .option("--sort-order <n>", "order among this provider's shared keys (lower first)", "0")
    .option("--weight <n>", "load-balancing weight among this provider's shared keys of equal sort order (1-1000)", "1")
    .option("--key-env <name>", "read the key from this environment variable instead of standard input")
    .option("--json", "print JSON")
    .action(async (opts: { provider: string; sortOrder: string; weight: string; keyEnv?: string; json?: boolean }) => {
      const sortOrder = Number(opts.sortOrder);
      if (!Number.isSafeInteger(sortOrder)) throw new CliError("--sort-order must be an integer");
      const weight = Number(opts.weight);
      if (!Number.isSafeInteger(weight) || weight < 1 || weight > 1000) throw new CliError("--weight must be an integer from 1 to 1000");
      let key: string;
      if (opts.keyEnv) {
        const v = process.env[opts.keyEnv];
        if (!v) throw new CliError(`environment variable ${opts.keyEnv} is not set`);
        key = v;
      } else key = await readStdin();
      const added = await withProviderKeys(config(), (a) => a.add({ provider: opts.provider, key, sortOrder, weight }));
      if (opts.json) printJson(json(added));
      else process.stdout.write(`provider key ${added.id} added (${added.provider} ${added.label})\n`);
    });

  pk.command("list")
    .description("list shared provider keys (masked labels only)")
    .option("--provider <slug>", "only this provider")
    .option("--json", "print JSON")
    .action(async (opts: { provider?: string; json?: boolean }) => {
      const rows = await withProviderKeys(config(), (a) => a.list(opts.provider));
      if (opts.json) printJson({ data: rows.map(json) });
      else for (const r of rows) process.stdout.write(`${line(r)}\n`);
    });

  for (const [name, disabled] of [["disable", true], ["enable", false]] as const) {
    pk.command(name)
      .argument("<id>", "provider key id")
      .option("--json", "print JSON")
      .action(async (id: string, opts: { json?: boolean }) => {
        const row = await withProviderKeys(config(), (a) => a.setDisabled(id, disabled));
        if (opts.json) printJson(json(row));
        else process.stdout.write(`provider key ${row.id} ${disabled ? "disabled" : "enabled"}\n`);
      });
  }

  pk.command("remove")
    .argument("<id>", "provider key id")
    .option("--json", "print JSON")
    .action(async (id: string, opts: { json?: boolean }) => {
      await withProviderKeys(config(), (a) => a.remove(id));
      if (opts.json) printJson({ removed: true, id });
      else process.stdout.write(`provider key ${id} removed\n`);
    });
};
