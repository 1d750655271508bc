/**
 * What RpcProvider (rpc-provider.ts) is built with: its endpoints' limits (the service sets them
 * from RPC_URL and the RPC_* variables), and who is told of the endpoints' health and of each
 * request (the service's logs, `/readyz` and metrics).
 */
import type { EndpointStatus } from "./endpoint.js";
import type { RpcRequestRecord } from "./request.js";

export interface RpcProviderOptions {
  /** Pins the network (no eth_chainId before calls); unset = detected once. */
  chainId?: bigint;
  /** A request not answered in full within this many ms (connecting and reading included) fails with TIMEOUT. Default 10 s. */
  timeoutMs?: number;
  /** The largest answer read, in bytes; a larger one is a failure of the endpoint. Default 8 MiB. */
  maxAnswerBytes?: number;
  /** How long a call waits for others to share its request, in ms. Default 1; 0 = none. */
  batchStallMs?: number;
  /** Most calls in one request. Default 100 (1 disables batching). */
  batchMaxCount?: number;
  /** Most concurrent connections to each HTTP endpoint (a WebSocket endpoint has one). Default 8. */
  maxSockets?: number;
  /**
   * How long a failed endpoint rests before its first health probe, in ms; doubles while it keeps
   * failing, up to 60 s. Also the first wait before a closed WebSocket is opened again, and before
   * a lost head subscription is tried again elsewhere. Default 2000.
   */
  restMs?: number;
  /** Told when an endpoint goes down or comes back (the service logs it). */
  onEndpointChange?: (change: EndpointStatus) => void;
  /** Told of every request to an endpoint once it is answered or failed (the service's metrics). */
  onRequest?: (request: RpcRequestRecord) => void;
}
