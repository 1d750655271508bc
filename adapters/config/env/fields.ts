/**
 * The kinds of value a variable may hold, as zod schemas whose messages start with the
 * variable's name (schema.ts puts them together).
 */
import { z } from "zod";

import { decimalToBaseUnits } from "../../../core/index.js";
import type { FeedBounds } from "../../chain/index.js";

/** An empty variable counts as unset. */
export const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (typeof value === "string" && value.trim() === "" ? undefined : value), schema.optional());

export const integer = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `${name}: must be an integer from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name}: must be an integer from ${min} to ${max}`);

/** A non-negative integer in decimal or in hex (0x…), as PKCS#11 tools print slot ids. */
export const decimalOrHex = (name: string) => {
  const message = `${name}: must be a non-negative integer, decimal or hex (0x…), at most ${Number.MAX_SAFE_INTEGER}`;
  return z
    .string()
    .regex(/^(\d+|0[xX][0-9a-fA-F]+)$/, message)
    .transform(Number)
    .refine((n) => Number.isSafeInteger(n), message);
};

export const decimal = (name: string) =>
  z
    .string()
    .regex(/^\d+(\.\d+)?$/, `${name}: must be a plain decimal number greater than 0, such as "10000"`)
    .refine((text) => Number(text) > 0, `${name}: must be greater than 0`);

export const flag = (name: string) =>
  z.enum(["true", "false"], { error: `${name}: must be true or false` }).transform((text) => text === "true");

/** "min-max", plain decimals in the pair's units, such as "0.5-2". */
export const bounds = (name: string) =>
  z
    .string()
    .regex(
      /^\s*\d+(\.\d+)?\s*-\s*\d+(\.\d+)?\s*$/,
      `${name}: must be "min-max", two plain decimal numbers in the pair's units, such as "0.5-2"`,
    )
    .transform((text): FeedBounds => {
      const [min, max] = text.split("-").map((part) => part.trim());
      return { min: min!, max: max! };
    })
    .refine(
      ({ min, max }) => compareDecimals(min, max) < 0 && Number(min) > 0,
      `${name}: min must be greater than 0 and less than max`,
    );

/** Compares two plain decimals exactly. */
function compareDecimals(a: string, b: string): number {
  const scale = Math.max(a.split(".")[1]?.length ?? 0, b.split(".")[1]?.length ?? 0);
  const units = (text: string) => decimalToBaseUnits(text, scale, "down") ?? 0n;
  const [x, y] = [units(a), units(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}
