/**
 * When a price feed's answer is used: each feed's maximum age and bounds (FEED_MAX_AGE_*_S,
 * FEED_BOUNDS_*), and the L2 sequencer's uptime feed with its grace period.
 */
import { DEFAULT_SEQUENCER_GRACE_S, FEED_SETTINGS, SEQUENCER_SETTINGS, type FeedPolicy } from "../../chain/index.js";
import type { Env } from "./schema.js";

export function feedPolicy(e: Env, problems: string[]): FeedPolicy {
  if (e[SEQUENCER_SETTINGS.grace] !== undefined && e[SEQUENCER_SETTINGS.feed] === undefined) {
    problems.push(`${SEQUENCER_SETTINGS.grace}: is only used with ${SEQUENCER_SETTINGS.feed}`);
  }
  const rule = (key: keyof typeof FEED_SETTINGS) => {
    const maxAgeS = e[FEED_SETTINGS[key].maxAge];
    const feedBounds = e[FEED_SETTINGS[key].bounds];
    return {
      ...(maxAgeS === undefined ? {} : { maxAgeS }),
      ...(feedBounds === undefined ? {} : { bounds: feedBounds }),
    };
  };
  const sequencer = e[SEQUENCER_SETTINGS.feed];
  return {
    tokenUsd: rule("tokenUsd"),
    eurUsd: rule("eurUsd"),
    chfUsd: rule("chfUsd"),
    nativeUsd: rule("nativeUsd"),
    ...(sequencer === undefined
      ? {}
      : { sequencer: { address: sequencer, graceS: e[SEQUENCER_SETTINGS.grace] ?? DEFAULT_SEQUENCER_GRACE_S } }),
  };
}
