import secureJson from 'secure-json-parse'
import { parseExactJsonWith } from './exact-json-parser.js'

export { JsonSyntaxError } from './exact-json-parser.js'

/**
 * JSON.parse, except that no integer loses digits (a number whose exact value is an integer outside
 * ±(2^53 − 1) becomes a `bigint`: exact-json-parser.ts), and that the keys that could reach a prototype
 * (`__proto__`, and `constructor` holding a `prototype`) are dropped, as secure-json-parse's "remove"
 * action does: no body is refused for them.
 */
export function parseExactJson (text: string): unknown {
  return parseExactJsonWith(text, parseSecurely)
}

const parseSecurely = (text: string): unknown =>
  secureJson.parse(text, undefined, { protoAction: 'remove', constructorAction: 'remove' })
