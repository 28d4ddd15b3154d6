/**
 * The error-detail contract shared by core and gateway: a ConnectError carrying an ErrorDetail
 * (reason, retryable, Retry-After, field). The core raises these; the gateway reads them (and raises
 * them for its own HTTP-level checks so one table renders every error).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema, type ErrorDetail } from "../gen/portico/errors/v1/error_detail_pb.js";

export interface ServiceErrorOptions {
  retryable?: boolean;
  retryAfterSeconds?: number;
  field?: string;
  hideMetadata?: boolean;
}

export function serviceError(code: Code, reason: string, message: string, opts: ServiceErrorOptions = {}): ConnectError {
  const detail = create(ErrorDetailSchema, {
    reason,
    retryable: opts.retryable ?? false,
    retryAfterSeconds: opts.retryAfterSeconds ?? 0,
    field: opts.field ?? "",
    hideMetadata: opts.hideMetadata ?? false,
  });
  return new ConnectError(message, code, undefined, [{ desc: ErrorDetailSchema, value: detail }]);
}

/** Reads the ErrorDetail of a ConnectError, if it has one. */
export function errorDetailOf(err: ConnectError): ErrorDetail | undefined {
  return err.findDetails(ErrorDetailSchema)[0];
}

