import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { backends, bearer, buildTestApp, expectError, postPlant, TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

const RACERS = 20
const staleVersion = (id: number) =>
  `plant ${id} is not in the state the request's If-Match or If-None-Match expects; read it again for its current ETag`
const absentPlant = (id: number) => `plant ${id} does not exist, and the request's If-Match needs it to`

const get = (app: FastifyInstance, id: number) => app.inject({ method: 'GET', url: `/plants/${id}`, headers: bearer() })

const put = (app: FastifyInstance, id: number, body: object, preconditions: Record<string, string>) => app.inject({
  method: 'PUT', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/json', ...preconditions }, payload: JSON.stringify(body)
})

const patch = (app: FastifyInstance, id: number, body: object, ifMatch: string) => app.inject({
  method: 'PATCH',
  url: `/plants/${id}`,
  headers: { ...bearer(), 'content-type': 'application/merge-patch+json', 'if-match': ifMatch },
  payload: JSON.stringify(body)
})

const remove = (app: FastifyInstance, id: number, ifMatch: string) =>
  app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: { ...bearer(), 'if-match': ifMatch } })

/** Stores the plant and returns the ETag a GET gives it. */
async function storedWithEntityTag (app: FastifyInstance, plant: { id: number, name: string, tag?: string }): Promise<string> {
  expect((await postPlant(app, plant)).statusCode).toBe(200)
  const read = await get(app, plant.id)
  expect(read.statusCode).toBe(200)
  return read.headers.etag as string
}

/**
 * 20 PATCHes and 20 PUTs of plant `id`, each with its own name, all with `If-Match: etag`, alternating
 * between `apps`; all sent at once.
 */
function racingUpdates (apps: readonly FastifyInstance[], id: number, etag: string): Array<Promise<LightMyRequestResponse>> {
  const appOf = (index: number) => apps[index % apps.length] as FastifyInstance
  return [
    ...Array.from({ length: RACERS }, (_, index) => patch(appOf(index), id, { name: `patched by ${index}` }, etag)),
    ...Array.from({ length: RACERS }, (_, index) => put(appOf(index + 1), id, { name: `put by ${index}`, tag: 'winner' }, { 'if-match': etag }))
  ]
}

/** Exactly one answer is `winnerStatus`; every other one is the 412 `loserMessage` names. Returns the winner. */
function expectOneWinner (answers: readonly LightMyRequestResponse[], winnerStatus: number, loserMessage: string): LightMyRequestResponse {
  const winners = answers.filter((answer) => answer.statusCode === winnerStatus)
  expect(winners).toHaveLength(1)
  for (const loser of answers.filter((answer) => answer.statusCode !== winnerStatus)) expectError(loser, 412, loserMessage)
  return winners[0] as LightMyRequestResponse
}

/** The plant as stored now equals the winner's answer, ETag included. */
async function expectStoredAs (app: FastifyInstance, id: number, winner: LightMyRequestResponse): Promise<void> {
  const stored = await get(app, id)
  expect({ status: stored.statusCode, body: stored.body, etag: stored.headers.etag })
    .toEqual({ status: 200, body: winner.body, etag: winner.headers.etag })
}

describe.each(backends)('Concurrent conditional writes on $name', (backend) => {
  const build = async () => buildTestApp({ store: await backend.open() })

  it('let exactly one of 40 PUTs and PATCHes carrying the same ETag succeed; the rest get 412', async () => {
    const app = await build()
    const etag = await storedWithEntityTag(app, { id: 7, name: 'Contested', tag: 'start' })

    const answers = await Promise.all(racingUpdates([app], 7, etag))

    const winner = expectOneWinner(answers, 200, staleVersion(7))
    expect(winner.body).toMatch(/^\{"id":7,"name":"(patched by \d+","tag":"start|put by \d+","tag":"winner)"\}$/)
    expect(winner.headers.etag).not.toBe(etag)
    await expectStoredAs(app, 7, winner)
  })

  it('let exactly one of racing DELETEs and PATCHes carrying the same ETag succeed, a DELETE for one plant and a PATCH for the other', async () => {
    const app = await build()
    const etags = [await storedWithEntityTag(app, { id: 8, name: 'Doomed?' }), await storedWithEntityTag(app, { id: 9, name: 'Doomed?' })]

    // Sent together, the DELETEs reach the store first (a PATCH has a body to read); a head start of a few
    // event-loop turns lets the PATCHes of plant 9 get there first instead. That both outcomes happen is
    // asserted below: each branch of the checks must run.
    const race = async (id: number, etag: string, patchHeadStartTurns: number) => {
      const patches = Array.from({ length: 5 }, (_, index) => patch(app, id, { tag: `kept by ${index}` }, etag))
      for (let turn = 0; turn < patchHeadStartTurns; turn++) await new Promise(setImmediate)
      const deletes = Array.from({ length: 5 }, () => remove(app, id, etag))
      return Promise.all([...patches, ...deletes])
    }
    const [eight, nine] = await Promise.all([race(8, etags[0] as string, 0), race(9, etags[1] as string, 4)])

    const winnerStatuses = new Set<number>()
    for (const [id, answers] of [[8, eight], [9, nine]] as const) {
      const successes = answers.filter((answer) => answer.statusCode === 204 || answer.statusCode === 200)
      expect(successes).toHaveLength(1)
      const winner = successes[0] as LightMyRequestResponse
      winnerStatuses.add(winner.statusCode)
      const losers = answers.filter((answer) => answer !== winner)
      if (winner.statusCode === 204) {
        expect(winner.body).toBe('')
        for (const loser of losers) expectError(loser, 412, absentPlant(id))
        expectError(await get(app, id), 404, `no plant has id ${id}`)
      } else {
        expect(winner.body).toMatch(new RegExp(`^\\{"id":${id},"name":"Doomed\\?","tag":"kept by \\d"\\}$`))
        for (const loser of losers) expectError(loser, 412, staleVersion(id))
        await expectStoredAs(app, id, winner)
      }
    }
    expect(winnerStatuses).toEqual(new Set([200, 204]))
  })

  it('let exactly one of racing create-only PUTs (If-None-Match: *) create the plant', async () => {
    const app = await build()

    const answers = await Promise.all(Array.from({ length: RACERS }, (_, index) =>
      put(app, 11, { name: `first come ${index}` }, { 'if-none-match': '*' })))

    const winner = expectOneWinner(answers, 201, staleVersion(11))
    expect(winner.headers.location).toBe('/plants/11')
    expect(winner.body).toMatch(/^\{"id":11,"name":"first come \d+"\}$/)
    await expectStoredAs(app, 11, winner)
  })
})

describe('Concurrent conditional writes across two instances on one PostgreSQL database', () => {
  /** Two apps on one database; `writeBatches[i]` counts the write batches instance i committed. */
  async function twoInstances () {
    const url = await createTestDatabase()
    const writeBatches = [0, 0]
    const instance = async (index: number) => buildTestApp({
      store: await openPostgresStore(url, { ...TEST_POSTGRES_OPTIONS, onBatchCommitted: () => { writeBatches[index] = (writeBatches[index] ?? 0) + 1 } })
    })
    return { apps: [await instance(0), await instance(1)] as const, writeBatches }
  }

  /**
   * Runs `race` on plant `firstId`, then on the next ids, until both instances got as far as a write
   * transaction in one attempt (the race was then decided in the database), at most 5 times; checks
   * every attempt with `check`. On a busy machine one instance may commit before the other has read the
   * plant, and the other's requests are then refused on that read alone: a race, but not the one meant.
   */
  async function raceInTheDatabase (
    writeBatches: number[], firstId: number,
    race: (id: number) => Promise<LightMyRequestResponse[]>,
    check: (id: number, answers: readonly LightMyRequestResponse[]) => Promise<void>
  ): Promise<void> {
    const attempts: number[][] = []
    for (let id = firstId; attempts.length < 5; id++) {
      writeBatches.fill(0)
      const answers = await race(id)
      attempts.push([...writeBatches])
      await check(id, answers)
      // Both instances got as far as a write transaction: the race was decided in the database.
      if (writeBatches.every((count) => count > 0)) return
    }
    expect.fail(`in none of 5 attempts did both instances reach a write transaction (write batches per attempt: ${JSON.stringify(attempts)})`)
  }

  it('let exactly one of 40 PUTs and PATCHes with the same ETag, split between the instances, succeed', async () => {
    const { apps: [first, second], writeBatches } = await twoInstances()

    await raceInTheDatabase(writeBatches, 7, async (id) => {
      const etag = await storedWithEntityTag(first, { id, name: 'Contested', tag: 'start' })
      // The second instance reads the same ETag (and so has a connection ready for the race).
      expect((await get(second, id)).headers.etag).toBe(etag)
      // Only the racing writes count, not the one that stored the plant.
      writeBatches.fill(0)
      return await Promise.all(racingUpdates([first, second], id, etag))
    }, async (id, answers) => {
      const winner = expectOneWinner(answers, 200, staleVersion(id))
      await expectStoredAs(first, id, winner)
      await expectStoredAs(second, id, winner)
    })
  })

  it('let exactly one of create-only PUTs, split between the instances, create the plant', async () => {
    const { apps: [first, second], writeBatches } = await twoInstances()

    await raceInTheDatabase(writeBatches, 11, async (id) => {
      // Both instances have read the plant once (and so have a connection ready for the race).
      for (const app of [first, second]) expect((await get(app, id)).statusCode).toBe(404)
      return await Promise.all(Array.from({ length: RACERS }, (_, index) =>
        put(index % 2 === 0 ? first : second, id, { name: `first come ${index}`, tag: 'race' }, { 'if-none-match': '*' })))
    }, async (id, answers) => {
      const winner = expectOneWinner(answers, 201, staleVersion(id))
      expect(winner.headers.location).toBe(`/plants/${id}`)
      await expectStoredAs(first, id, winner)
      await expectStoredAs(second, id, winner)
    })
  })
})
