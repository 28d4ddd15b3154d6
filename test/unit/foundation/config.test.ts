import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/config.js";

describe("configuration", () => {
  it("binds to loopback with documented defaults", () => {
    const c = loadConfig({});
    expect(c.host).toBe("127.0.0.1");
    expect(c.httpPort).toBe(8080);
    expect(c.grpcPort).toBe(50051);
    expect(c.bodyLimitBytes).toBe(1_048_576);
    expect(c.brand).toBe("service");
    expect(c.interns.interactionDeadlineMs).toBe(300_000);
    expect(c.interns.heartbeatIntervalMs).toBe(30_000);
    expect(c.production).toBe(false);
    expect(c.databaseUrl).toBeUndefined();
  });

  it("reads the gateway address handed to intern hosts and the run credential lifetime", () => {
    expect(loadConfig({}).interns.gatewayUrl).toBeUndefined();
    expect(loadConfig({}).interns.runCredentialTtlMs).toBe(4 * 60 * 60 * 1000);
    expect(loadConfig({ PORTICO_PUBLIC_URL: "https://portico.example/" }).interns.gatewayUrl).toBe("https://portico.example");
    expect(loadConfig({ PORTICO_PUBLIC_URL: "https://a.example", PORTICO_INTERN_GATEWAY_URL: "http://10.0.0.5:8080" }).interns.gatewayUrl).toBe("http://10.0.0.5:8080");
    expect(() => loadConfig({ PORTICO_INTERN_GATEWAY_URL: "ftp://x" })).toThrow(/^PORTICO_INTERN_GATEWAY_URL must be an http\(s\) URL$/);
    expect(() => loadConfig({ PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS: "10" })).toThrow(/^PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS must be an integer between 60000 and /);
  });

  it("refuses malformed values instead of guessing", () => {
    expect(() => loadConfig({ PORT: "eighty" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: "70000" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORTICO_PRODUCTION: "maybe" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORTICO_BRAND: "Not A Word" })).toThrow(ConfigError);
  });

  it("names the variable at fault and its rule", () => {
    expect(() => loadConfig({ PORT: "eighty" })).toThrow(/^PORT must be an integer between 0 and 65535$/);
    expect(() => loadConfig({ PORTICO_GRPC_PORT: "1.5" })).toThrow(/^PORTICO_GRPC_PORT must be an integer between 0 and 65535$/);
    expect(() => loadConfig({ PORTICO_EMBEDDED_HOST: "maybe" })).toThrow(/^PORTICO_EMBEDDED_HOST must be true or false$/);
    expect(() => loadConfig({ PORTICO_BRAND: "Not A Word" })).toThrow(/^PORTICO_BRAND must be a short lowercase word$/);
    expect(() => loadConfig({ PORTICO_INTERN_RATE_LIMIT: "0" })).toThrow(/^PORTICO_INTERN_RATE_LIMIT must be an integer between 1 and /);
  });

  it("takes a metrics token of 16 to 256 printable characters, and never repeats a refused one", () => {
    expect(loadConfig({}).metricsToken).toBeUndefined();
    expect(loadConfig({ PORTICO_METRICS_TOKEN: "" }).metricsToken).toBeUndefined();
    expect(loadConfig({ PORTICO_METRICS_TOKEN: "0123456789abcdef" }).metricsToken).toBe("0123456789abcdef");
    for (const bad of ["short-secret", "has a space in it ok", "x".repeat(257)]) {
      let message = "";
      try {
        loadConfig({ PORTICO_METRICS_TOKEN: bad });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message).toBe("PORTICO_METRICS_TOKEN must be 16 to 256 printable characters without spaces");
    }
  });

  it("reads the core's metrics port, off unless set", () => {
    expect(loadConfig({}).metricsPort).toBeUndefined();
    expect(loadConfig({ PORTICO_METRICS_PORT: "" }).metricsPort).toBeUndefined();
    expect(loadConfig({ PORTICO_METRICS_PORT: "0" }).metricsPort).toBe(0);
    expect(loadConfig({ PORTICO_METRICS_PORT: "9464" }).metricsPort).toBe(9464);
    for (const bad of ["-1", "65536", "94.5", "metrics"]) {
      expect(() => loadConfig({ PORTICO_METRICS_PORT: bad })).toThrow("PORTICO_METRICS_PORT must be an integer between 0 and 65535");
    }
  });

  it("reads the health memory's cool-downs: 1 s first, 30 s longest by default", () => {
    expect(loadConfig({}).chat).toMatchObject({ cooldownBaseMs: 1_000, cooldownMaxMs: 30_000 });
    expect(loadConfig({ PORTICO_COOLDOWN_BASE_MS: "250", PORTICO_COOLDOWN_MAX_MS: "60000" }).chat).toMatchObject({ cooldownBaseMs: 250, cooldownMaxMs: 60_000 });
    expect(() => loadConfig({ PORTICO_COOLDOWN_BASE_MS: "0" })).toThrow(/^PORTICO_COOLDOWN_BASE_MS must be an integer between 10 and 600000$/);
    expect(() => loadConfig({ PORTICO_COOLDOWN_MAX_MS: "soon" })).toThrow(/^PORTICO_COOLDOWN_MAX_MS must be an integer between 10 and 3600000$/);
  });

  it("treats an empty variable as unset and accepts the usual boolean words", () => {
    const c = loadConfig({ PORT: "", PORTICO_BRAND: "", PORTICO_PRODUCTION: "YES", PORTICO_EMBEDDED_HOST: "off" });
    expect(c).toMatchObject({ httpPort: 8080, brand: "service", production: true, embeddedHost: false });
  });

  it("reads the moderation plugin's provider: none unless a base URL is set, an http(s) URL, defaults for the rest", () => {
    expect(loadConfig({}).plugins.moderation).toBeUndefined();
    expect(loadConfig({ PORTICO_MODERATION_BASE_URL: "https://api.openai.com/v1/", PORTICO_MODERATION_API_KEY: "sk-x" }).plugins.moderation).toEqual({
      baseUrl: "https://api.openai.com/v1",
      apiKey: "sk-x",
      model: "omni-moderation-latest",
      timeoutMs: 10_000,
    });
    expect(() => loadConfig({ PORTICO_MODERATION_BASE_URL: "ftp://x" })).toThrow(/^PORTICO_MODERATION_BASE_URL must be an http\(s\) URL$/);
    expect(() => loadConfig({ PORTICO_MODERATION_TIMEOUT_MS: "5" })).toThrow(/^PORTICO_MODERATION_TIMEOUT_MS must be an integer between 100 and /);
  });

  it("declares keyless providers among the operator's OpenAI-compatible ones", () => {
    expect(loadConfig({}).providers.keyless).toEqual([]);
    const c = loadConfig({
      PORTICO_OPENAI_COMPATIBLE_PROVIDERS: "vllm=http://10.0.0.5:8000/v1,ollama=http://127.0.0.1:11434/v1/",
      PORTICO_KEYLESS_PROVIDERS: "ollama, vllm,ollama",
    });
    expect(c.providers.extraOpenAICompatible).toEqual({ vllm: "http://10.0.0.5:8000/v1", ollama: "http://127.0.0.1:11434/v1" });
    expect(c.providers.keyless).toEqual(["ollama", "vllm"]);
    // A built-in provider, or a slug not configured, cannot be keyless.
    expect(() => loadConfig({ PORTICO_KEYLESS_PROVIDERS: "openai" })).toThrow(/^PORTICO_KEYLESS_PROVIDERS must list slugs that PORTICO_OPENAI_COMPATIBLE_PROVIDERS defines/);
    expect(() => loadConfig({ PORTICO_OPENAI_COMPATIBLE_PROVIDERS: "vllm=http://x/v1", PORTICO_KEYLESS_PROVIDERS: "ollama" })).toThrow(ConfigError);
  });

  it("reads overrides", () => {
    const c = loadConfig({ HOST: "0.0.0.0", PORT: "9000", PORTICO_PRODUCTION: "true", DATABASE_URL: "postgresql://x@y/z" });
    expect(c).toMatchObject({ host: "0.0.0.0", httpPort: 9000, production: true, databaseUrl: "postgresql://x@y/z" });
  });

  it("serves the core over TLS only with both a certificate and a key file", () => {
    expect(loadConfig({}).grpcTls).toBeUndefined();
    expect(() => loadConfig({ PORTICO_GRPC_TLS_CERT_FILE: "/etc/c.pem" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORTICO_GRPC_TLS_KEY_FILE: "/etc/k.pem" })).toThrow(ConfigError);
    expect(loadConfig({ PORTICO_GRPC_TLS_CERT_FILE: "/etc/c.pem", PORTICO_GRPC_TLS_KEY_FILE: "/etc/k.pem" }).grpcTls).toEqual({ certFile: "/etc/c.pem", keyFile: "/etc/k.pem" });
  });

  it("tracing: off without an OTLP endpoint; the standard OTEL_* variables when set, malformed ones refused", () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" }).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing).toEqual({
      url: "http://collector:4318/v1/traces",
      protocol: "http/protobuf",
      headers: {},
      serviceName: "portico",
      scheduleDelayMs: 5000,
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
      sampler: { parentBased: true, ratio: 1 },
    });
    const t = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://ignored:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://collector.example/custom/traces",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: "Authorization=Bearer%20abc, x-team=ai",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-team=llm",
      OTEL_SERVICE_NAME: "portico-eu",
      OTEL_BSP_SCHEDULE_DELAY: "200",
    }).tracing;
    expect(t).toMatchObject({
      url: "https://collector.example/custom/traces",
      protocol: "http/json",
      headers: { authorization: "Bearer abc", "x-team": "llm" },
      serviceName: "portico-eu",
      scheduleDelayMs: 200,
    });
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or http\/json/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_HEADERS: "novalue" })).toThrow(/OTEL_EXPORTER_OTLP_HEADERS/);
    expect(() => loadConfig({ OTEL_BSP_SCHEDULE_DELAY: "soon" })).toThrow(/OTEL_BSP_SCHEDULE_DELAY/);
    // Sampling: the standard sampler names; a ratio for the ratio samplers; the export batch within the queue.
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(loadConfig({ ...on, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25" }).tracing?.sampler).toEqual({ parentBased: true, ratio: 0.25 });
    expect(loadConfig({ ...on, OTEL_TRACES_SAMPLER: "traceidratio" }).tracing?.sampler).toEqual({ parentBased: false, ratio: 1 });
    expect(loadConfig({ ...on, OTEL_TRACES_SAMPLER: "always_off", OTEL_TRACES_SAMPLER_ARG: "0.5" }).tracing?.sampler).toEqual({ parentBased: false, ratio: 0 });
    expect(loadConfig({ ...on, OTEL_BSP_MAX_QUEUE_SIZE: "100", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "4096" }).tracing?.maxExportBatchSize).toBe(100);
    expect(() => loadConfig({ ...on, OTEL_TRACES_SAMPLER: "jaeger_remote" })).toThrow(/OTEL_TRACES_SAMPLER must be one of/);
    expect(() => loadConfig({ ...on, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "1.5" })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
  });
});
