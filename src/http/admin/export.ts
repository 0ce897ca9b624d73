import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { ExportQuery, NDJSON_MEDIA_TYPE } from '../../schemas/export.js'
import { ref } from '../../schemas/kinds.js'
import { StoredPlant } from '../../schemas/plants.js'
import type { PlantStore } from '../../store/plant-store.js'
import { exportPlants } from '../../transfer/export.js'
import { bearerSecurity } from '../docs.js'
import { authenticatedOperationErrors } from '../responses.js'

export interface ExportRoutesOptions {
  readonly store: Pick<PlantStore, 'list'>
}

/** `GET /admin/export`: every plant as NDJSON, streamed page by page (docs/reference/api/export.md). */
export async function exportRoutes (app: FastifyInstance, options: ExportRoutesOptions): Promise<void> {
  const { store } = options
  app.get('', {
    schema: {
      operationId: 'exportPlants',
      summary: 'Export every plant as NDJSON',
      description: 'Every plant, or only those with one tag, one JSON document per line exactly as `GET /plants/{id}` shows ' +
        'it, ordered by id ascending, each line ending in a line feed; an empty store gives an empty body. The body is ' +
        'streamed page by page in constant memory. A plant committed before the request arrived is in it, one deleted ' +
        'before is not; writes while it streams may or may not appear, and no plant appears twice. If the store fails ' +
        'after the answer has begun, the connection is closed before the end of the body, so a cut export never looks ' +
        'complete. `plantstore import` reads these lines.',
      tags: ['export'],
      security: bearerSecurity('admin'),
      querystring: ExportQuery,
      response: {
        200: {
          description: 'The plants, one per line',
          content: { [NDJSON_MEDIA_TYPE]: { schema: { ...ref(StoredPlant), description: 'Each line of the body is one of these' } } }
        },
        ...authenticatedOperationErrors
      }
    }
  }, async (request, reply) => {
    // The route's body is a stream, not the JSON its schema's type provider would type; the query is checked all the same.
    const chunks = exportPlants(store, request.query as ExportQuery)
    // The first page is read before the answer starts, so a store that cannot be read gets a 503.
    const first = await chunks.next()
    reply.type(NDJSON_MEDIA_TYPE).header('cache-control', 'no-store')
    if (first.done === true) return reply.send(Buffer.alloc(0))
    const body = Readable.from((async function * () {
      yield first.value
      yield * chunks
    })(), { objectMode: false })
    body.once('error', (error) => { request.log.error({ err: error }, 'export cut short: the store failed while the body streamed') })
    return reply.send(body)
  })
}
