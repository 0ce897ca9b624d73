/** An id or a sequence number as callers may give it: a bigint, a safe-integer number, or canonical decimal text. */
export type IntegerInput = bigint | number | string

export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n
const CANONICAL_DECIMAL = /^(?:0|-?[1-9]\d*)$/

/**
 * The canonical decimal text of an integer, as paths, queries and the service's own answers write it.
 * A number outside the safe range is a TypeError: its digits were lost before it got here.
 */
export function integerText (value: IntegerInput, name: string, min = INT64_MIN, max = INT64_MAX): string {
  let exact: bigint
  switch (typeof value) {
    case 'bigint':
      exact = value
      break
    case 'number':
      if (!Number.isSafeInteger(value)) {
        throw new TypeError(`${name} ${value} is not a safe integer: pass a bigint or a decimal string to keep it exact`)
      }
      exact = BigInt(value)
      break
    case 'string':
      if (!CANONICAL_DECIMAL.test(value)) throw new TypeError(`${name} ${JSON.stringify(value)} is not a canonical decimal integer`)
      exact = BigInt(value)
      break
    default:
      throw new TypeError(`${name} must be a bigint, a safe integer or a decimal string, not ${typeof value}`)
  }
  if (exact < min || exact > max) throw new RangeError(`${name} ${exact} is outside ${min} … ${max}`)
  return exact.toString()
}

export const idText = (id: IntegerInput): string => integerText(id, 'id')

export const idValue = (id: IntegerInput): bigint => BigInt(idText(id))
