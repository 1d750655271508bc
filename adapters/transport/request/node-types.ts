import type { connectNodeAdapter } from "@connectrpc/connect-node";

/** A request handler for node:http and node:http2 alike (connect-node's own type, not exported by name). */
export type NodeHandlerFn = ReturnType<typeof connectNodeAdapter>;
/** http.IncomingMessage or http2.Http2ServerRequest. */
export type NodeServerRequest = Parameters<NodeHandlerFn>[0];
/** http.ServerResponse or http2.Http2ServerResponse. */
export type NodeServerResponse = Parameters<NodeHandlerFn>[1];
