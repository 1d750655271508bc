/**
 * gRPC's own services, which probes and tools call without an api_key: health checking
 * (grpc.health.v1) and server reflection (v1 and v1alpha).
 */
export { healthService, type HealthOptions } from "./health.service.js";
export { Reflection, reflectionService } from "./reflection.service.js";
