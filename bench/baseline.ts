import bearerAuth from '@fastify/bearer-auth'
import Fastify from 'fastify'
import { ErrorBody } from '../src/schemas/error-body.js'
import { NewPlant, Plant, StoredPlant } from '../src/schemas/plants.js'

/**
 * The baseline the service is measured against: a bare Fastify app with the same TypeBox schemas
 * (Fastify's default Ajv validation and serialization), a bearer-token check and a Map. No durability,
 * no exact int64, and no logging: what "as fast as Fastify goes" looks like for these routes. With
 * BENCH_LOGGED=1, Fastify's default request logging (`logger: true`: two lines a request to standard
 * output), the second anchor: what a user would otherwise run.
 */
const token = process.env.BENCH_TOKEN ?? 'bench-token'
const app = Fastify({ logger: process.env.BENCH_LOGGED === '1' })
await app.register(bearerAuth, { keys: [token] })
const plants = new Map<number, { id: number, name: string, tag?: string }>()

app.post('/plants', {
  schema: {
    body: { ...NewPlant, $id: undefined },
    response: { 200: { ...Plant, $id: undefined }, 409: { ...ErrorBody, $id: undefined } }
  }
}, async (request, reply) => {
  const { id, name, tag } = request.body as { id: number, name: string, tag?: string }
  const existing = plants.get(id)
  if (existing !== undefined && (existing.name !== name || existing.tag !== tag)) {
    return reply.code(409).send({ error: 409, message: 'conflict' })
  }
  plants.set(id, tag === undefined ? { id, name } : { id, name, tag })
  return reply.header('location', `/plants/${id}`).send(tag === undefined ? { name } : { name, tag })
})

app.get('/plants/:id', {
  schema: { response: { 200: { ...StoredPlant, $id: undefined }, 404: { ...ErrorBody, $id: undefined } } }
}, async (request, reply) => {
  const plant = plants.get(Number((request.params as { id: string }).id))
  return plant === undefined ? reply.code(404).send({ error: 404, message: 'not found' }) : plant
})

app.get('/plants', {
  schema: { response: { 200: { type: 'array', items: { ...StoredPlant, $id: undefined } } } }
}, async (request) => {
  const { limit = '100', after } = request.query as { limit?: string, after?: string }
  const page = []
  for (const plant of plants.values()) {
    if (after !== undefined && plant.id <= Number(after)) continue
    page.push(plant)
    if (page.length === Number(limit)) break
  }
  return page
})

const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' })
process.stdout.write(`Server listening at ${address}\n`)
process.once('SIGTERM', () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
