/**
 * A real @grpc/grpc-js client built from the .proto files, as an internal service would build one.
 */
import { resolve } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const PROTO_ROOT = resolve(import.meta.dirname, "../../proto");

export function loadGrpcPackage(protoFile: string): grpc.GrpcObject {
  const def = protoLoader.loadSync(resolve(PROTO_ROOT, protoFile), {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(def);
}

/** Resolves "portico.identity.v1.IdentityService" in a loaded package to a client constructor. */
export function grpcClient<T = any>(protoFile: string, serviceName: string, coreUrl: string): T {
  const pkg = loadGrpcPackage(protoFile);
  const ctor = serviceName.split(".").reduce<any>((o, k) => o?.[k], pkg) as typeof grpc.Client;
  if (!ctor) throw new Error(`service ${serviceName} not found in ${protoFile}`);
  return new ctor(coreUrl.replace(/^http:\/\//, ""), grpc.credentials.createInsecure()) as unknown as T;
}

export function bearer(key: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${key}`);
  return md;
}

/** Promisified unary call returning either the response or the gRPC error. */
export function unary<Res = any>(
  client: any,
  method: string,
  request: unknown,
  metadata: grpc.Metadata = new grpc.Metadata(),
): Promise<{ response?: Res; error?: grpc.ServiceError }> {
  return new Promise((resolvePromise) => {
    client[method](request, metadata, (error: grpc.ServiceError | null, response: Res) => {
      resolvePromise(error ? { error } : { response });
    });
  });
}

export { grpc };
