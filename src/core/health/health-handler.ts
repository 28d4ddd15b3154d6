import type { ServiceImpl } from "@connectrpc/connect";
import { HealthService } from "../../gen/portico/health/v1/health_service_pb.js";

export interface HealthDeps {
  instanceId: string;
  /** Resolves true when the database answers. */
  ping(): Promise<boolean>;
  /** Other dependencies: name → whether it answers now (e.g. redis). */
  dependencies?: Record<string, () => boolean>;
}

export function createHealthHandler(deps: HealthDeps): ServiceImpl<typeof HealthService> {
  return {
    async check() {
      const unavailable: string[] = [];
      try {
        if (!(await deps.ping())) unavailable.push("database");
      } catch {
        unavailable.push("database");
      }
      for (const [name, up] of Object.entries(deps.dependencies ?? {})) if (!up()) unavailable.push(name);
      return { ready: unavailable.length === 0, instanceId: deps.instanceId, unavailable };
    },
  };
}
