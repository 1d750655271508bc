/**
 * The access file's approval rules (`approvals`, docs/operations.md "Approvals"): their shape, and
 * the checks that relate them to the keys (access-file.ts reads the file with them).
 */
import { z } from "zod";

import { type ApprovalRule, LIMIT_USD_DECIMALS, type Role } from "../../core/index.js";
import { parseWindow, usdUnits } from "./access-file-values.js";

/** One rule: a trade of one of `keys` (absent: any key's) counting more than `aboveUsd` waits for `approvers` approver keys. */
export const approvalRuleSchema = z.strictObject({
  name: z.string().min(1, "must not be empty").max(100, "must be at most 100 characters"),
  aboveUsd: z
    .string()
    .regex(
      new RegExp(`^\\d+(\\.\\d{1,${LIMIT_USD_DECIMALS}})?$`),
      `must be a decimal string such as "25000" or "99.5" (at most ${LIMIT_USD_DECIMALS} decimals)`,
    ),
  keys: z.array(z.string()).min(1, "must list at least one (leave it out for every key)").optional(),
  approvers: z.int().min(1, "must be at least 1").max(10, "must be at most 10").optional(),
  expiresAfter: z.string(),
});

type RuleText = z.infer<typeof approvalRuleSchema>;

/** The keys as the rules see them: each name, and its roles. */
interface KeyText {
  name: string;
  roles: readonly Role[];
}

/**
 * Checks the rules against the keys and builds them, adding each problem (with its place in the
 * file) to `problems`: unique names, keys that exist, an expiry that is a duration, and enough
 * keys with the approver role for `approvers` (a rule no one can satisfy would hold every trade
 * it matches until it expires).
 */
export function checkApprovals(
  rules: readonly RuleText[] | undefined,
  keys: readonly KeyText[],
  problems: string[],
): ApprovalRule[] {
  const names = new Map<string, number>();
  const keyNames = new Set(keys.map((key) => key.name));
  const approverKeys = keys.filter((key) => key.roles.includes("approver")).length;
  return (rules ?? []).flatMap((rule, i) => {
    const at = `approvals[${i}]`;
    const before = problems.length;
    const seen = names.get(rule.name);
    if (seen !== undefined) problems.push(`${at}.name: "${rule.name}" is already the name of approvals[${seen}]`);
    else names.set(rule.name, i);
    rule.keys?.forEach((name, j) => {
      if (!keyNames.has(name)) problems.push(`${at}.keys[${j}]: "${name}" is the name of no key`);
    });
    const expiresAfterMs = parseWindow(rule.expiresAfter);
    if (expiresAfterMs === undefined)
      problems.push(
        `${at}.expiresAfter: "${rule.expiresAfter}" is not a duration (a whole number of s, m, h or d, at most 366d: 30m, 1h, 7d)`,
      );
    const approvers = rule.approvers ?? 1;
    if (approvers > approverKeys)
      problems.push(
        `${at}.approvers: ${approvers} distinct approver keys must approve, and the file has ${approverKeys} key${approverKeys === 1 ? "" : "s"} with the approver role`,
      );
    if (problems.length > before || expiresAfterMs === undefined) return [];
    return [
      {
        name: rule.name,
        aboveUsd: usdUnits(rule.aboveUsd),
        ...(rule.keys && { keys: new Set(rule.keys) }),
        approvers,
        expiresAfterMs,
        expiresAfter: rule.expiresAfter,
      },
    ];
  });
}
