/** The fields of a generated protobuf message type, without protobuf-es's internal markers: what a handler returns for it. */
export type Init<T> = Omit<T, "$typeName" | "$unknown">;
