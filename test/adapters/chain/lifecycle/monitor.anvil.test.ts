/**
 * The lifecycle monitor (adapters/chain/lifecycle/monitor.ts) driven one look at a time, on
 * anvil, over an in-memory journal: the cases the service-level tests do not reach directly.
 */
import { expect } from "chai";
import { Wallet } from "ethers";

import { createRpcProvider, toSigner, type RpcProvider } from "../../../../adapters/chain/index.js";
import { FeeOracle, Receipts } from "../../../../adapters/chain/blocks/index.js";
import { WalletMonitor, type LifecycleSettings } from "../../../../adapters/chain/lifecycle/index.js";
import { WasmSigningKey } from "../../../../adapters/chain/tx/index.js";
import { MemoryJournal } from "../../../../adapters/journal/index.js";
import { hardhatAccount } from "../../../../scripts/embedded-chain/chain.js";
import { startAnvil, type Anvil } from "../../../helpers/anvil.js";

const GWEI = 10n ** 9n;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the lifecycle monitor, a look at a time (anvil)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let provider: RpcProvider;
  let journal: MemoryJournal;
  let monitor: WalletMonitor;
  let warnings: Array<{ details: Record<string, unknown>; message: string }>;
  const signer = new Wallet(new WasmSigningKey(hardhatAccount(2).privateKey));
  const settings: LifecycleSettings = {
    confirmations: 1,
    reorgDepth: 64,
    resubmitAfterMs: 60_000,
    intervalMs: 1_000,
    leaseMs: 10_000,
    feeCap: 100n * GWEI,
    minAgeMs: 0,
  };

  function makeMonitor(overrides: Partial<LifecycleSettings> = {}): WalletMonitor {
    return new WalletMonitor({
      signer: toSigner(signer),
      chainId: 31337n,
      provider,
      journal,
      fees: new FeeOracle(provider, { cacheMs: 0 }),
      receipts: new Receipts({ provider, confirmations: 1, timeoutMs: 1_000, journalAfterMs: 0 }),
      settings: { ...settings, ...overrides },
      log: {
        warn: (details, message) => warnings.push({ details: details as Record<string, unknown>, message }),
        info() {},
      },
      holder: "test",
    });
  }

  beforeEach(async function () {
    anvil = await startAnvil();
    await anvil.rpc("evm_setAutomine", [false]);
    provider = createRpcProvider(anvil.url, 31337n);
    journal = new MemoryJournal();
    warnings = [];
    monitor = makeMonitor();
  });

  afterEach(async function () {
    provider.destroy();
    await anvil.stop();
  });

  async function send(nonce: number, fees = { maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: GWEI }) {
    const rawTx = await signer.signTransaction({
      type: 2,
      chainId: 31337,
      nonce,
      to: signer.address,
      value: 0n,
      gasLimit: 21_000n,
      data: "0x",
      ...fees,
    });
    const hash = (await anvil.rpc<string>("eth_sendRawTransaction", [rawTx])).toLowerCase();
    await journal.recordSlot(
      { wallet: signer.address, nonce, purpose: "approval", deadline: null },
      { hash, rawTx, ...fees, noop: false, sentAt: new Date() },
    );
    return hash;
  }

  const mine = () => anvil.rpc("evm_mine");
  const nonce = async () => Number(await anvil.rpc<string>("eth_getTransactionCount", [signer.address, "latest"]));

  it("fills a nonce gap below a recorded transaction with a no-op, so both are mined", async function () {
    await send(1); // nonce 0 never sent: anvil holds nonce 1 back
    await mine();
    expect(await nonce()).to.equal(0);
    await monitor.look();
    const filler = (await journal.slot(signer.address, 0))!;
    expect(filler).to.deep.include({ purpose: "filler", tradeId: null });
    expect(filler.broadcasts[0]!.noop).to.equal(true);
    expect(warnings.map((w) => w.message)).to.include("filled a nonce gap with a no-op");
    await mine();
    expect(await nonce()).to.equal(2);
    await monitor.look();
    expect((await journal.openSlots(signer.address)).map((slot) => [slot.nonce, slot.state])).to.deep.equal([
      [0, "mined"],
      [1, "mined"],
    ]);
  });

  it("replaces a transaction not mined in time with +10 % on both fees, and counts the replacement's receipt", async function () {
    const first = await send(0, { maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: GWEI });
    await sleep(5);
    await makeMonitor({ resubmitAfterMs: 1 }).look(); // due at once
    expect((await journal.slot(signer.address, 0))!.broadcasts, "the replacement is recorded").to.have.length(2);
    const slot = (await journal.slot(signer.address, 0))!;
    expect(slot.broadcasts).to.have.length(2);
    const replacement = slot.broadcasts[1]!;
    expect(replacement).to.deep.include({
      maxFeePerGas: 11n * GWEI + 1n,
      maxPriorityFeePerGas: 1_100_000_001n,
      noop: false,
    });
    expect(warnings.at(-1)).to.deep.include({ message: "replaced a transaction not mined in time, with higher fees" });
    expect(warnings.at(-1)!.details).to.deep.include({ nonce: 0, previousHash: first, hash: replacement.hash });
    // The node took the replacement in place of the first.
    expect(await anvil.rpc("eth_getTransactionByHash", [first])).to.equal(null);
    await monitor.look(); // not due again: 60 s × 2 now
    expect((await journal.slot(signer.address, 0))!.broadcasts).to.have.length(2);
    await mine();
    await monitor.look();
    expect((await journal.slot(signer.address, 0))!).to.deep.include({ state: "mined" });
    expect((await journal.slot(signer.address, 0))!.mined!.hash).to.equal(replacement.hash);
  });

  it("does not act on a wallet whose lease another instance holds", async function () {
    await journal.acquireLease(`monitor:${signer.address.toLowerCase()}`, "another-instance", 60_000);
    await send(1);
    await monitor.look();
    expect(await journal.slot(signer.address, 0)).to.equal(undefined);
    expect(warnings).to.deep.equal([]);
  });
});
