import type { FastifyInstance } from 'fastify'
import type { PlantStore } from '../store/plant-store.js'
import { Health } from '../schemas/health.js'
import { ref } from '../schemas/kinds.js'
import { errorResponses } from './responses.js'

/** `/healthz`: the process serves HTTP. `/readyz`: and its store can take writes. Neither needs a token. */
export async function healthRoutes (app: FastifyInstance, options: { store: PlantStore }): Promise<void> {
  const { store } = options

  app.get('/healthz', {
    schema: {
      operationId: 'getLiveness',
      summary: 'Liveness probe',
      description: 'Answers 200 while the process can serve HTTP. Needs no token.',
      tags: ['operations'],
      security: [],
      response: { 200: { ...ref(Health), description: 'The process is alive' }, '4XX': errorResponses.malformed }
    }
  }, async () => ({ status: 'ok' as const }))

  app.get('/readyz', {
    schema: {
      operationId: 'getReadiness',
      summary: 'Readiness probe',
      description: 'Answers 200 when the store can take writes, 503 with `Retry-After` when it cannot: unreachable, ' +
        'read-only (a PostgreSQL standby or read-only database) or out of disk space. Needs no token.',
      tags: ['operations'],
      security: [],
      response: { 200: { ...ref(Health), description: 'The store can take writes' }, '4XX': errorResponses.malformed, 503: errorResponses[503] }
    }
  }, async () => {
    await store.checkWritable()
    return { status: 'ok' as const }
  })
}
