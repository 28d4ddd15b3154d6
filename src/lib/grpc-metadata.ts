/**
 * What gRPC metadata may hold, as an HTTP/2 request carries it: the split gateway's client checks a caller's headers
 * with these (src/gateway/h2-grpc-transport.ts), and the core checks a hop channel's calls with the same
 * (src/core/grpc-fast-path.ts), so a call on the channel brings nothing a call on its own stream could not.
 */
/** A metadata name: gRPC's lowercase set. */
export const LEGAL_KEY = /^[0-9a-z_.-]+$/;
/** A metadata value other than a `-bin` one: printable ASCII. */
export const PRINTABLE_ASCII = /^[ -~]*$/;
