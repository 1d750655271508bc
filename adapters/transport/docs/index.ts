/**
 * What documents the API: the OpenAPI document of the JSON routes (GET /api/v1/openapi.json,
 * split by section in openapi-*.ts) and the Swagger UI page over it (GET /docs).
 */
export { docsRoutes, type DocsRoutes } from "./docs.js";
export { OPENAPI_DOCUMENT, OPENAPI_JSON } from "./openapi.js";
