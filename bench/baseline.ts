import bearerAuth from '@fastify/bearer-auth'
import Fastify from 'fastify'
import { ErrorBody } from '../src/schemas/error-body.js'
import { NewPlant, Plant, StoredPlant } from '../src/schemas/plants.js'

/**
 * The baseline the service is measured against: a bare Fastify app with the same TypeBox schemas
 * (Fastify's default Ajv validation and serialization), a bearer-token check and a Map, with the plants
 * also in an array in id order, where a page after an id starts by binary search. No durability,
 * no exact int64, and no logging: what "as fast as Fastify goes" looks like for these routes. With
 * BENCH_LOGGED=1, Fastify's default request logging (`logger: true`: two lines a request to standard
 * output), the second anchor: what a user would otherwise run. With BENCH_PLANTS=N it starts with the
 * plants 1 to N of bench/plant-catalog.ts, those the query part loads into the stores.
 */
type BaselinePlant = { id: number, name: string, tag?: string }
const token = process.env.BENCH_TOKEN ?? 'bench-token'
const app = Fastify({ logger: process.env.BENCH_LOGGED === '1' })
await app.register(bearerAuth, { keys: [token] })
const plants = new Map<number, BaselinePlant>()
/** The plants in id order. */
const ordered: BaselinePlant[] = []

/** The index in `ordered` of the first plant whose id is above `id`. */
function indexAfter (id: number): number {
  let low = 0
  let high = ordered.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if ((ordered[middle] as BaselinePlant).id <= id) low = middle + 1
    else high = middle
  }
  return low
}

function store (plant: BaselinePlant): void {
  const replaced = plants.has(plant.id)
  plants.set(plant.id, plant)
  const last = ordered.at(-1)
  if (last === undefined || plant.id > last.id) ordered.push(plant)
  else ordered.splice(indexAfter(plant.id) - (replaced ? 1 : 0), replaced ? 1 : 0, plant)
}

const catalogPlants = Number(process.env.BENCH_PLANTS ?? 0)
if (catalogPlants > 0) {
  const { nameOf, tagOf } = await import('./plant-catalog.js')
  for (let id = 1; id <= catalogPlants; id++) store({ id, name: nameOf(id), tag: tagOf(id) })
}

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
  store(tag === undefined ? { id, name } : { id, name, tag })
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
  const start = after === undefined ? 0 : indexAfter(Number(after))
  return ordered.slice(start, start + Number(limit))
})

const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' })
process.stdout.write(`Server listening at ${address}\n`)
process.once('SIGTERM', () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
