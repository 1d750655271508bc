/**
 * Which protocol a request speaks, from its path and its content type: the service's own RPCs
 * (TokenService), gRPC's own services (health, reflection), an RPC this server does not have,
 * or plain HTTP (the JSON routes). The steps of the pipeline ask here.
 */
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1Alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import type { NodeServerRequest } from "../request/index.js";

/** Every TokenService RPC's path starts with this; nothing else does. */
export const RPC_PATH_PREFIX = `/${TokenService.typeName}/`;

/** gRPC's own services, served without an api_key: probes and tools call them without one. */
export const ECOSYSTEM_SERVICES = [Health, ServerReflectionV1, ServerReflectionV1Alpha] as const;
const ECOSYSTEM_PATH_PREFIXES = ECOSYSTEM_SERVICES.map((service) => `/${service.typeName}/`);

/** gRPC health's paths: a probe, like /healthz and /readyz. */
export const HEALTH_PREFIX = `/${Health.typeName}/`;

/** An RPC's path shape: /package.Service/Method. */
const RPC_PATH = /^\/[A-Za-z_][\w.]*\/[A-Za-z_]\w*$/;

/** Every RPC this server serves, by its path: the route the request metrics give an RPC. */
export const RPC_ROUTES: ReadonlySet<string> = new Set([
  ...Object.values(TokenService.method).map((m) => `/${TokenService.typeName}/${m.name}`),
  ...ECOSYSTEM_SERVICES.flatMap((service) =>
    Object.values(service.method).map((m) => `/${service.typeName}/${m.name}`),
  ),
]);

/** Whether `path` is one of gRPC's own services' (health, reflection). */
export function isEcosystemPath(path: string): boolean {
  for (const prefix of ECOSYSTEM_PATH_PREFIXES) if (path.startsWith(prefix)) return true;
  return false;
}

/** The protocol a request speaks: an RPC protocol on RPC paths, else "http" (the JSON routes). */
export function protocolOf(req: NodeServerRequest, path: string): string {
  if (req.method !== "POST" || !RPC_PATH.test(path)) return "http";
  const contentType = String(req.headers["content-type"] ?? "");
  if (/^application\/grpc-web/i.test(contentType)) return "grpc-web";
  if (/^application\/grpc/i.test(contentType)) return "grpc";
  return "connect";
}

/** Whether a request is an RPC by its shape (POST to /package.Service/Method, a gRPC or Connect content type), served here or not. */
export function isRpcRequest(req: NodeServerRequest, path: string): boolean {
  if (req.method !== "POST" || !RPC_PATH.test(path)) return false;
  const contentType = String(req.headers["content-type"] ?? "");
  const connectProtocol =
    req.headers["connect-protocol-version"] !== undefined || /^application\/(connect\+|proto\b)/i.test(contentType);
  return /^application\/grpc/i.test(contentType) || connectProtocol;
}
