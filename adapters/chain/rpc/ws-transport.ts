/**
 * One WebSocket connection to one JSON-RPC endpoint (ws:// or wss:// in RPC_URL), under
 * RpcProvider: it carries the endpoint's calls, single and batched, and what the node pushes
 * (eth_subscription notifications, head-subscription.ts). Node's own WebSocket (global since
 * Node 22): no dependency.
 *
 * A request is one message; its answers are matched by id, whatever their order or however the
 * node splits them (one array, or one message per call). Ids are this connection's own (the
 * caller's are put back on the answers), so that no two requests in flight share one. The
 * request's deadline covers connecting too. A request fails, as an HTTP request does when its
 * connection fails, when:
 * - the connection cannot be opened, or closes before the answer came (a lost answer: the node
 *   may have taken the call; this class never sends a call twice);
 * - the deadline passes: the connection is then closed and opened again (a dead link is not
 *   waited on by every later call, and a subscription on it is not trusted);
 * - the node sends a message over `maxAnswerBytes`, or one that is not JSON: every request sent
 *   and not answered fails, and the connection is replaced (which request it answered cannot
 *   be told).
 * One error with a null id (the node could not tell which request it is about: a batch over its
 * limit, a message it could not read) is the answer of every request sent and not answered;
 * RpcProvider reads it as the node refusing the whole request, as over HTTP.
 *
 * The size cap is checked on each whole message: Node's WebSocket hands over none before it has
 * all of it, so a larger one is read before it is refused; the deadline bounds how long that takes.
 *
 * Once opened, the connection is kept: when it closes, it is opened again after `reconnectMs`,
 * doubled after each failed attempt up to `maxReconnectMs`; a call meanwhile opens it at once.
 * No message ever carries the URL (providers put API keys in it).
 */
import { makeError, type JsonRpcPayload } from "ethers";

export interface WsTransportOptions {
  /** The largest message read, in bytes; a larger one is a failure of the connection. */
  maxAnswerBytes: number;
  /** The first wait before opening a closed connection again, in ms. */
  reconnectMs: number;
  /** The longest such wait, in ms. */
  maxReconnectMs: number;
}

/** A JSON-RPC message from the node: an answer (id, result or error) or a notification (method, params). */
interface Message {
  id?: unknown;
  result?: unknown;
  error?: unknown;
  method?: unknown;
  params?: unknown;
}

/** A request waiting for its answers. */
interface InFlight {
  /** This connection's id of each call not answered yet -> the caller's id. */
  ids: Map<number, JsonRpcPayload["id"]>;
  /** Answers so far, with the caller's ids. */
  answers: Message[];
  batch: boolean;
  /** Sent on the open connection (else still waiting for it to open). */
  sent: boolean;
  resolve: (parsed: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

/** The connection closed before the answer came: the node may or may not have taken the call. */
function connectionLost(): Error {
  return Object.assign(new Error("the WebSocket connection to the JSON-RPC node closed before the answer came"), {
    code: "ECONNRESET",
  });
}

function connectionRefused(): Error {
  return makeError("the JSON-RPC node's WebSocket could not be opened", "SERVER_ERROR", { request: "JSON-RPC" });
}

export class WsTransport {
  readonly #url: string;
  readonly #options: WsTransportOptions;
  #socket: WebSocket | undefined;
  /** The connection being opened, until it is open or failed, and how to fail it. */
  #opening: Promise<WebSocket> | undefined;
  #failOpening: ((error: Error) => void) | undefined;
  /** Requests in flight, by each of their calls' ids on this connection. */
  readonly #inFlight = new Map<number, InFlight>();
  #nextId = 1;
  /** Opened once: from then on the connection is kept open. */
  #used = false;
  #reconnectMs: number;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #destroyed = false;
  readonly #notificationListeners = new Set<(params: unknown) => void>();
  readonly #stateListeners = new Set<(open: boolean) => void>();

  constructor(url: URL, options: WsTransportOptions) {
    this.#url = url.href;
    this.#options = options;
    this.#reconnectMs = options.reconnectMs;
  }

  /** Whether the connection is open now. */
  get open(): boolean {
    return this.#socket?.readyState === WebSocket.OPEN;
  }

  /**
   * Sends `payload` (one call, or a batch) and answers what the node answered, parsed: the
   * answer, or the answers (by the caller's ids, in the order they came), or the node's one error
   * for the whole request. Rejects on a transport failure only.
   */
  exchange(payload: JsonRpcPayload | JsonRpcPayload[], timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (this.#destroyed) return reject(connectionLost());
      const calls = Array.isArray(payload) ? payload : [payload];
      const request: InFlight = {
        ids: new Map(),
        answers: [],
        batch: Array.isArray(payload),
        sent: false,
        resolve,
        reject,
        timer: undefined,
      };
      const local = calls.map((call) => {
        const id = this.#nextId++;
        request.ids.set(id, call.id);
        this.#inFlight.set(id, request);
        return { ...call, id };
      });
      const text = JSON.stringify(Array.isArray(payload) ? local : local[0]);
      request.timer = setTimeout(() => {
        if (!this.#settle(request)) return;
        reject(
          makeError(`the JSON-RPC node did not answer within ${timeoutMs} ms`, "TIMEOUT", {
            operation: "request",
            reason: "timeout",
          }),
        );
        // Sent and not answered, or not even connected: the link may be dead; replaced, not waited
        // on by every later call.
        if (request.sent || this.#opening !== undefined) this.#replace();
      }, timeoutMs);
      this.#open().then(
        (socket) => {
          if (!this.#isInFlight(request)) return;
          if (socket.readyState !== WebSocket.OPEN) {
            this.#settle(request);
            return reject(connectionLost());
          }
          request.sent = true;
          socket.send(text);
        },
        (error: Error) => {
          if (this.#settle(request)) reject(error);
        },
      );
    });
  }

  /** `listener` gets the params of each notification the node pushes (eth_subscription). */
  onNotification(listener: (params: unknown) => void): () => void {
    this.#notificationListeners.add(listener);
    return () => this.#notificationListeners.delete(listener);
  }

  /** `listener` is told when the connection opens (true) and when it closes (false). */
  onState(listener: (open: boolean) => void): () => void {
    this.#stateListeners.add(listener);
    return () => this.#stateListeners.delete(listener);
  }

  /** Closes the connection for good; requests in flight fail as lost. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    clearTimeout(this.#reconnectTimer);
    this.#replace();
    this.#notificationListeners.clear();
    this.#stateListeners.clear();
  }

  /** The open connection, opening one when there is none. */
  #open(): Promise<WebSocket> {
    const socket = this.#socket;
    if (socket !== undefined && socket.readyState === WebSocket.OPEN) return Promise.resolve(socket);
    if (this.#opening !== undefined) return this.#opening;
    // Closing, its close not heard yet: gone all the same (its requests fail now, not at their deadline).
    if (socket !== undefined) this.#replace();
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    const opening = new Promise<WebSocket>((resolve, reject) => {
      this.#failOpening = reject;
      let next: WebSocket;
      try {
        next = new WebSocket(this.#url);
      } catch {
        return reject(connectionRefused());
      }
      next.binaryType = "arraybuffer";
      this.#socket = next;
      next.onopen = () => {
        if (this.#socket !== next) return;
        this.#opening = undefined;
        this.#failOpening = undefined;
        this.#used = true;
        this.#reconnectMs = this.#options.reconnectMs;
        resolve(next);
        this.#tell(true);
      };
      next.onmessage = (event: MessageEvent) => {
        if (this.#socket === next) this.#message(event.data);
      };
      next.onerror = () => {}; // a close follows
      next.onclose = () => {
        if (this.#socket !== next) return;
        const wasOpen = this.#opening === undefined;
        this.#opening = undefined;
        this.#failOpening = undefined;
        this.#socket = undefined;
        if (!wasOpen) reject(connectionRefused());
        this.#closed(wasOpen, wasOpen ? connectionLost() : connectionRefused());
      };
    });
    this.#opening = opening;
    opening.catch(() => {}); // its callers are told; a reconnect nobody waits for is not an unhandled rejection
    return opening;
  }

  /** Drops the connection now (without waiting for a close handshake a dead link never completes). */
  #replace(): void {
    const socket = this.#socket;
    if (socket === undefined) return;
    const wasOpen = this.#opening === undefined;
    this.#failOpening?.(connectionRefused());
    this.#socket = undefined;
    this.#opening = undefined;
    this.#failOpening = undefined;
    try {
      socket.close();
    } catch {
      // already closing
    }
    this.#closed(wasOpen, connectionLost());
  }

  /**
   * The connection is gone: the requests sent on it fail (those waiting for it to open are told
   * by its opening), listeners are told, and it is opened again later.
   */
  #closed(wasOpen: boolean, error: Error): void {
    for (const request of this.#sent()) {
      if (this.#settle(request)) request.reject(error);
    }
    if (wasOpen) this.#tell(false);
    if (this.#destroyed || !this.#used || this.#reconnectTimer !== undefined) return;
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (!this.#destroyed) void this.#open().catch(() => {});
    }, this.#reconnectMs);
    this.#reconnectTimer.unref();
    this.#reconnectMs = Math.min(this.#reconnectMs * 2, this.#options.maxReconnectMs);
  }

  #message(data: unknown): void {
    const size = typeof data === "string" ? Buffer.byteLength(data) : (data as ArrayBuffer).byteLength;
    if (size > this.#options.maxAnswerBytes) {
      this.#broken(
        makeError(`the JSON-RPC node answered more than ${this.#options.maxAnswerBytes} bytes`, "SERVER_ERROR", {
          request: "JSON-RPC",
        }),
      );
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data as ArrayBuffer));
    } catch {
      this.#broken(
        makeError("the JSON-RPC node answered something that is not JSON", "SERVER_ERROR", { request: "JSON-RPC" }),
      );
      return;
    }
    if (Array.isArray(parsed)) {
      // A batch's answers: each request it answers is complete (a call left out fails alone, as over HTTP).
      const answered = new Set<InFlight>();
      for (const message of parsed) {
        const request = this.#take(message as Message);
        if (request !== undefined) answered.add(request);
      }
      for (const request of answered) this.#complete(request);
      return;
    }
    if (parsed === null || typeof parsed !== "object") return;
    const message = parsed as Message;
    if (message.method === "eth_subscription") {
      for (const listener of this.#notificationListeners) listener(message.params);
      return;
    }
    if ((message.id === null || message.id === undefined) && message.error !== undefined) {
      // About no request in particular: every one sent gets it as its answer.
      for (const request of this.#sent()) {
        if (this.#settle(request)) request.resolve(message);
      }
      return;
    }
    const request = this.#take(message);
    if (request !== undefined && request.ids.size === 0) this.#complete(request);
  }

  /** A message no request can be given: every request sent fails with `error`, the connection is replaced. */
  #broken(error: Error): void {
    for (const request of this.#sent()) {
      if (this.#settle(request)) request.reject(error);
    }
    this.#replace();
  }

  /** The requests sent on the connection and not answered yet. */
  #sent(): InFlight[] {
    return [...new Set(this.#inFlight.values())].filter((request) => request.sent);
  }

  /** Files `message` under its request (the caller's id put back); undefined when it answers none in flight. */
  #take(message: Message): InFlight | undefined {
    if (message === null || typeof message !== "object" || typeof message.id !== "number") return undefined;
    const request = this.#inFlight.get(message.id);
    if (request === undefined) return undefined;
    this.#inFlight.delete(message.id);
    const id = request.ids.get(message.id)!;
    request.ids.delete(message.id);
    request.answers.push({ ...message, id });
    return request;
  }

  #complete(request: InFlight): void {
    if (!this.#settle(request)) return;
    request.resolve(request.batch ? request.answers : request.answers[0]);
  }

  #isInFlight(request: InFlight): boolean {
    return request.timer !== undefined;
  }

  /** Takes `request` out of those in flight; false when it was already settled. */
  #settle(request: InFlight): boolean {
    if (request.timer === undefined) return false;
    clearTimeout(request.timer);
    request.timer = undefined;
    for (const id of request.ids.keys()) this.#inFlight.delete(id);
    return true;
  }

  #tell(open: boolean): void {
    for (const listener of this.#stateListeners) listener(open);
  }
}
