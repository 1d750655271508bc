/**
 * The one router (step 6 of the pipeline): a table from path to handler, and a fallback for every
 * path it does not hold, as connect-node's adapter keeps one map of procedures and a fallback.
 * Each handler is given the request's context as an argument (its id, path, logger, client
 * address and api_key check): nothing is looked up again on the request.
 */
import type { NodeServerRequest, NodeServerResponse, RequestContext, RouteHandler } from "../request/index.js";

export class Router {
  readonly #paths = new Map<string, RouteHandler>();
  readonly #fallback: RouteHandler;

  /** @param fallback - for a path no entry has */
  constructor(fallback: RouteHandler) {
    this.#fallback = fallback;
  }

  /**
   * Adds each path's handler.
   * @throws Error for a path that has a handler already: one path, one handler
   */
  add(entries: Iterable<readonly [string, RouteHandler]>): this {
    for (const [path, handler] of entries) {
      if (this.#paths.has(path)) throw new Error(`the router has a handler for ${path} already`);
      this.#paths.set(path, handler);
    }
    return this;
  }

  /** Whether `path` has a handler of its own. */
  has(path: string): boolean {
    return this.#paths.has(path);
  }

  /** Hands a request to its path's handler, or to the fallback. */
  route(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext): void {
    (this.#paths.get(context.path) ?? this.#fallback)(req, res, context);
  }
}
