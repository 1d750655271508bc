/**
 * The module hooks scripts/bench-records/register.ts registers: an import that resolves to a
 * module with a stand-in (`<module>.ab.ts` beside it) gets the stand-in, except the stand-in's
 * own import of that module.
 */
import type { InitializeHook, ResolveHook } from "node:module";

let standIns: Record<string, string> = {};

export const initialize: InitializeHook<{ standIns: Record<string, string> }> = (data) => {
  standIns = data.standIns;
};

export const resolve: ResolveHook = async (specifier, context, nextResolve) => {
  const resolved = await nextResolve(specifier, context);
  const standIn = standIns[resolved.url];
  if (standIn === undefined || context.parentURL === standIn) return resolved;
  return { ...resolved, url: standIn };
};
