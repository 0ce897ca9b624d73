import { TypeCompiler } from '@sinclair/typebox/compiler'
import { JsonSyntaxError, parseExactJson } from '../exact-json.js'
import { NewPlant } from '../schemas/plants.js'
import { describeViolation } from '../schemas/violations.js'
import { plantRecord, type PlantRecord } from '../store/plant-store.js'

const checkPlant = TypeCompiler.Compile(NewPlant)

/** A line's plant, or why the line is not one, in the words a `POST /plants` answers with. */
export type ParsedLine = { readonly plant: PlantRecord } | { readonly problem: string }

/**
 * Reads one NDJSON line as a plant by the rules of `POST /plants`: exact int64 ids (so `1.0` is the id 1,
 * as it is there), names and tags by the text rules, unknown members ignored.
 */
export function parsePlantLine (text: string): ParsedLine {
  let value: unknown
  try {
    value = parseExactJson(text)
  } catch (error) {
    if (error instanceof JsonSyntaxError) return { problem: `not JSON: ${error.message}` }
    return { problem: 'not JSON' }
  }
  if (!checkPlant.Check(value)) {
    const first = checkPlant.Errors(value).First()
    return { problem: first === undefined ? 'not a plant' : describeViolation(first, 'the line', true) }
  }
  return { plant: plantRecord(BigInt(value.id), value.name, value.tag) }
}
