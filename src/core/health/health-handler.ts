import type { ServiceImpl } from "@connectrpc/connect";
import { HealthService } from "../../gen/portico/health/v1/health_service_pb.js";

export interface HealthDeps {
  instanceId: string;
  /** Resolves true when the database answers. */
  ping(): Promise<boolean>;
}

export function createHealthHandler(deps: HealthDeps): ServiceImpl<typeof HealthService> {
  return {
    async check() {
      let ready = false;
      try {
        ready = await deps.ping();
      } catch {
        ready = false;
      }
      return { ready, instanceId: deps.instanceId };
    },
  };
}
