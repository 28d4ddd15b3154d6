/** Public surface of the intern host. */
export { createInternHost, HOST_VERSION, type InternHost } from "./link.js";
export { startEmbeddedHost, builtinAgentProfile, type EmbeddedHostOptions } from "./embedded.js";
export { runInternHostCommand, type InternHostCommandOptions } from "./cli.js";
export {
  defaultInternHostLimits,
  internHostOptionsFromEnv,
  loadAgentProfile,
  validateAgentProfile,
  resolveLimits,
  type AgentProfile,
  type InternHostLimits,
  type InternHostOptions,
  type SandboxStrategy,
  type CwdStrategy,
} from "./options.js";
export { inProcessLauncher, spawnAgentProcess, type AgentLauncher, type AgentChannel, type AgentLaunchSpec } from "./agent-process.js";
export type { SessionInfo } from "./engine.js";
