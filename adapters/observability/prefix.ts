/** The prefix of every metric name the service defines (Prometheus's convention: one per application). */
export const PREFIX = "token_service_";
