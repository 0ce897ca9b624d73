import type { PlantStore } from '../store/plant-store.js'

/** Plants read per page: large enough that a page costs little more than its rows, small enough to stay a blip. */
export const EXPORT_PAGE_SIZE = 1000

export interface ExportRequest {
  /** Only the plants with exactly this tag. */
  readonly tag?: string
}

/**
 * Every plant of the store (or of one tag) as NDJSON, ordered by id, one page's lines per chunk: one
 * JSON document per line exactly as `GET /plants/{id}` shows it, each line ending in `\n`. Pages are
 * read by keyset (`after` the last id), so memory stays that of one page whatever the store's size, and
 * no plant is read twice: a plant committed before the export began is in it, one deleted before is not,
 * and writes meanwhile may or may not appear.
 */
export async function * exportPlants (store: Pick<PlantStore, 'list'>, request: ExportRequest = {}, pageSize = EXPORT_PAGE_SIZE): AsyncGenerator<string, void, undefined> {
  let after: bigint | undefined
  do {
    const page = await store.list({
      limit: pageSize,
      lines: true,
      ...(after === undefined ? {} : { after }),
      ...(request.tag === undefined ? {} : { tag: request.tag })
    })
    if (page.json !== '') yield page.json
    after = page.nextAfter
  } while (after !== undefined)
}

/** How many plants a chunk of `exportPlants` holds: one per line. */
export function plantsInChunk (chunk: string): number {
  let lines = 0
  for (let index = chunk.indexOf('\n'); index !== -1; index = chunk.indexOf('\n', index + 1)) lines++
  return lines
}
