/**
 * gRPC health checking (grpc.health.v1): what Kubernetes gRPC probes, grpc_health_probe and
 * load balancers call. It follows /readyz: SERVING while the service is ready (chain reachable,
 * wallets funded, none stuck), NOT_SERVING otherwise and from the moment the shutdown begins.
 * connect-es has no health service of its own (connectrpc/connect-es#797).
 *
 * - Check, for "" (the whole server) or a served service's name; NOT_FOUND for any other name.
 * - Watch: the status at once, then each change (looked at every `watchIntervalMs`); an unknown
 *   name gets SERVICE_UNKNOWN and stays open, as the protocol says. Every Watch ends when the
 *   shutdown begins, after sending NOT_SERVING, so that it never holds the drain.
 */
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";

import {
  HealthCheckResponse_ServingStatus as Status,
  type Health,
  type HealthCheckRequest,
} from "../../../gen/grpc/health/v1/health_pb.js";

export interface HealthOptions {
  /** Whether the service is ready (the same check as /readyz, cached). */
  ready: () => Promise<boolean>;
  /** The names Check and Watch know besides "": the services served. */
  services: readonly string[];
  /** Aborted when the shutdown begins. */
  closing: AbortSignal;
  /** How often Watch looks for a change, in ms. Default 1000. */
  watchIntervalMs?: number;
}

export function healthService(options: HealthOptions): ServiceImpl<typeof Health> {
  const known = new Set(["", ...options.services]);
  const interval = options.watchIntervalMs ?? 1000;
  const status = async (): Promise<Status> => {
    if (options.closing.aborted) return Status.NOT_SERVING;
    return (await options.ready().catch(() => false)) ? Status.SERVING : Status.NOT_SERVING;
  };

  return {
    async check(request: HealthCheckRequest) {
      if (!known.has(request.service))
        throw new ConnectError(`unknown service ${JSON.stringify(request.service)}`, Code.NotFound);
      return { status: await status() };
    },

    async *watch(request: HealthCheckRequest, context: HandlerContext) {
      if (!known.has(request.service)) {
        yield { status: Status.SERVICE_UNKNOWN };
        await until(context.signal, options.closing);
        return;
      }
      let last: Status | undefined;
      for (;;) {
        const now = await status();
        if (now !== last) {
          yield { status: now };
          last = now;
        }
        if (options.closing.aborted || context.signal.aborted) return;
        await sleep(interval, context.signal, options.closing);
      }
    },
  };
}

/** Resolves after `ms`, or at once when either signal aborts. */
function sleep(ms: number, ...signals: AbortSignal[]): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const signal of signals) signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const signal of signals) signal.addEventListener("abort", done, { once: true });
  });
}

/** Resolves when either signal aborts. */
function until(...signals: AbortSignal[]): Promise<void> {
  return sleep(2 ** 31 - 1, ...signals);
}
