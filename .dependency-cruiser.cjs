/**
 * Dependency rules that keep the hexagon's shape (see STYLE.md). Run with
 * `npm run lint:deps`; any "error" fails the build.
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
