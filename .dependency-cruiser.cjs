/**
 * Dependency rules that keep the hexagon's shape (docs/architecture.md). Run with
 * `npm run lint:deps` (part of `npm run lint`); any "error" fails the build.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: "core-is-pure",
      comment:
        "core/ is the domain: it may depend on other core/ modules and on the npm packages zod and " +
        "@noble/hashes only. Chains, transports, logging and scripts are adapters' business.",
      severity: "error",
      from: { path: "^core/" },
      to: { pathNot: ["^core/", "^node_modules/(zod|@noble/hashes)/"] },
    },
    {
      name: "core-no-node-builtins",
      comment: "core/ must run anywhere: no node: built-ins (fs, http, net, crypto, ...).",
      severity: "error",
      from: { path: "^core/" },
      to: { dependencyTypes: ["core"] },
    },
    {
      name: "adapters-not-to-scripts-or-test",
      comment: "Adapters are production code: they never import from scripts/ or test/.",
      severity: "error",
      from: { path: "^adapters/" },
      to: { path: "^(scripts|test)/" },
    },
    {
      name: "adapters-use-the-core-index",
      comment:
        "Adapters reach the core through core/index.ts only: what the core offers them is that file's " +
        "exports, and the core's files can move without touching an adapter.",
      severity: "error",
      from: { path: "^adapters/" },
      to: { path: "^core/", pathNot: "^core/index\\.ts$" },
    },
    {
      name: "adapter-areas-apart",
      comment:
        "The chain, journal and transport adapters and shared/ do not import each other; what two of " +
        "them need is in shared/. The composition root (main.ts, dev-mode.ts), config/ and observability/ " +
        "(which watches the others through hooks the root wires) are the only places that see several.",
      severity: "error",
      from: { path: "^adapters/(chain|journal|transport|shared|webhooks)/" },
      to: { path: "^adapters/", pathNot: ["^adapters/$1/", "^adapters/shared/"] },
    },
    {
      name: "shared-stands-alone",
      comment: "adapters/shared/ is used by the adapter areas, so it imports none of them.",
      severity: "error",
      from: { path: "^adapters/shared/" },
      to: { path: "^adapters/", pathNot: "^adapters/shared/" },
    },
    {
      name: "no-cycles",
      comment: "No import cycles, in production code or tests.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // Count `import type` too: a type-only import of ethers in core/ still ties it to ethers.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      mainFields: ["module", "main", "types", "typings"],
    },
  },
};
