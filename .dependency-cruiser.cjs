/**
 * Dependency rules that keep the hexagon's shape (docs/architecture.md). Run with
 * `npm run lint:deps` (part of `npm run lint`); any "error" fails the build.
 * @type {import('dependency-cruiser').IConfiguration}
 */
/**
 * The chain adapter's folders and, for each, the folders it may import: the layering written at
 * the top of adapters/chain/index.ts (tx ← signers, tx ← rpc ← blocks ← send ← lifecycle, send ← trade,
 * blocks ← price ← trade, and blocks ← watch). trade/ and send/ do not import lifecycle/ or watch/:
 * the assembly (assembly.ts) builds them and hands each its parts.
 */
const CHAIN_LAYERS = {
  tx: [],
  signers: ["tx"],
  rpc: ["tx"],
  blocks: ["tx", "rpc"],
  send: ["tx", "rpc", "blocks"],
  price: ["tx", "rpc", "blocks"],
  lifecycle: ["tx", "rpc", "blocks", "send"],
  watch: ["tx", "rpc", "blocks"],
  trade: ["tx", "rpc", "blocks", "send", "price"],
};

/**
 * The transport adapter's folders and, for each, the folders it may import: the layering written
 * at the top of adapters/transport/index.ts (request ← rpc ← json ← http, docs between request and
 * json; grpc-services stands alone). http/ may import every other folder, so it has no rule of its own.
 */
const TRANSPORT_LAYERS = {
  request: [],
  "grpc-services": [],
  docs: ["request"],
  rpc: ["request"],
  json: ["request", "rpc", "docs"],
};

/**
 * The rules of an adapter area organised in folders by job (chain/, transport/): inside it, a
 * folder reaches another only through that folder's index.ts, and only the folders below it in
 * `layers` (the one at the top, absent from `layers`, may import all); the area's own files reach
 * the folders through their index.ts too; outside it, production code (`outside`) comes in
 * through the area's index.ts only, and tests through that or a folder's index.ts.
 */
function foldersByJob(area, layers, outside) {
  const root = `adapters/${area}`;
  const doors = `^${root}/[^/]+/index\\.ts$`;
  return [
    {
      name: `${area}-folders-through-their-doors`,
      comment: `Inside ${root}/, each folder is a job: it reaches another folder only through that folder's index.ts.`,
      severity: "error",
      from: { path: `^${root}/([^/]+)/` },
      to: { path: `^${root}/`, pathNot: [`^${root}/$1/`, doors] },
    },
    {
      name: `${area}-door-opens-on-folder-doors`,
      comment: `The ${area} area's own files (index.ts, its door, and what sits beside it) reach the folders through their index.ts, never a file behind them.`,
      severity: "error",
      from: { path: `^${root}/[^/]+$` },
      to: { path: `^${root}/[^/]+/`, pathNot: doors },
    },
    ...Object.entries(layers).map(([folder, below]) => ({
      name: `${area}-${folder}-imports-only-below`,
      comment:
        `${root}/${folder}/ imports ${below.length === 0 ? `no other folder of the ${area} adapter` : `only ${below.join("/, ")}/ of its other folders`}: ` +
        `the layering at the top of ${root}/index.ts, which keeps the folders free of cycles.`,
      severity: "error",
      from: { path: `^${root}/${folder}/` },
      to: { path: `^${root}/[^/]+/`, pathNot: `^${root}/(${[folder, ...below].join("|")})/` },
    })),
    {
      name: `${area}-entered-through-its-door`,
      comment: `Outside the ${area} adapter, ${outside} reaches it through ${root}/index.ts only.`,
      severity: "error",
      from: { pathNot: `^(${root}|test)/` },
      to: { path: `^${root}/`, pathNot: `^${root}/index\\.ts$` },
    },
    {
      name: `${area}-tested-through-its-doors`,
      comment: `Tests reach the ${area} adapter through its index.ts, or, for a unit test of one folder's mechanism, through that folder's index.ts.`,
      severity: "error",
      from: { path: "^test/" },
      to: { path: `^${root}/`, pathNot: [`^${root}/index\\.ts$`, doors] },
    },
  ];
}

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
    ...foldersByJob("transport", TRANSPORT_LAYERS, "production code (the composition root, config/, scripts/)"),
    ...foldersByJob("chain", CHAIN_LAYERS, "production code (the composition root, config/, observability/, scripts/)"),
    {
      name: "journal-entered-through-its-door",
      comment:
        "Outside the journal adapter, production code reaches it through adapters/journal/index.ts only " +
        "(openJournal and the journals' types): which storage holds the trades is its business.",
      severity: "error",
      from: { pathNot: "^(adapters/journal|test)/" },
      to: { path: "^adapters/journal/", pathNot: "^adapters/journal/index\\.ts$" },
    },
    {
      name: "journal-storages-apart",
      comment:
        "postgres/, sqlite/ and memory/ each implement every port on their own storage, side by side: " +
        "none imports another's files; what they share is in adapters/journal/ (transitions.ts, webhook-events.ts, reservations.ts).",
      severity: "error",
      from: { path: "^adapters/journal/(postgres|sqlite|memory)/" },
      to: { path: "^adapters/journal/(postgres|sqlite|memory)/", pathNot: "^adapters/journal/$1/" },
    },
    {
      name: "journal-tested-through-its-door",
      comment:
        "Tests reach the journals through adapters/journal/index.ts, and a storage's migrations.ts for " +
        "the tests of its schema history.",
      severity: "error",
      from: { path: "^test/" },
      to: {
        path: "^adapters/journal/",
        pathNot: ["^adapters/journal/index\\.ts$", "^adapters/journal/(postgres|sqlite)/migrations\\.ts$"],
      },
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
