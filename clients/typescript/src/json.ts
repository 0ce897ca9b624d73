import { parseExactJsonWith } from '../../../src/exact-json-parser.js'

/** JSON.parse, except that an integer beyond ±(2^53 − 1) comes back as an exact bigint: the service's own parser. */
export const parseJson = (text: string): unknown => parseExactJsonWith(text, JSON.parse)

/** JSON.stringify for the bodies the client sends, except that a bigint is written as an exact JSON integer. */
export function jsonText (value: unknown): string {
  if (typeof value === 'bigint') return value.toString()
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const members = Object.entries(value).filter(([, member]) => member !== undefined)
    return `{${members.map(([key, member]) => `${JSON.stringify(key)}:${jsonText(member)}`).join(',')}}`
  }
  return JSON.stringify(value)
}
