import Fastify from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { turnBatchedHandlers } from '../../src/http/turn-batched-handlers.js'

async function buildBatchedApp () {
  const batches: number[] = []
  const handled: string[] = []
  const app = Fastify()
  onTestFinished(() => app.close())
  app.addHook('onRequest', async (request, reply) => {
    if (request.headers.authorization !== 'yes') await reply.code(401).send({ refused: true })
  })
  await app.register(turnBatchedHandlers, { onBatch: (size) => batches.push(size) })
  app.get('/echo/:word', async (request) => {
    const { word } = request.params as { word: string }
    handled.push(word)
    if (word === 'boom') throw new Error('boom')
    return { word }
  })
  await app.ready()
  return { app, batches, handled }
}

describe('Turn-batched handlers', () => {
  it('run the handlers of requests parsed in one turn together, each answering its own request', async () => {
    const { app, batches, handled } = await buildBatchedApp()
    const words = Array.from({ length: 20 }, (_, index) => `w${index}`)

    const responses = await Promise.all(words.map((word) => app.inject({ url: `/echo/${word}`, headers: { authorization: 'yes' } })))

    expect(responses.map((response) => response.json())).toEqual(words.map((word) => ({ word })))
    expect(batches).toEqual([20])
    expect(handled).toEqual(words)
  })

  it('answer a failing handler with its error and the rest of its batch normally', async () => {
    const { app, batches } = await buildBatchedApp()

    const responses = await Promise.all(['a', 'boom', 'b'].map((word) => app.inject({ url: `/echo/${word}`, headers: { authorization: 'yes' } })))

    expect(responses.map((response) => response.statusCode)).toEqual([200, 500, 200])
    expect(responses[2]?.json()).toEqual({ word: 'b' })
    expect(batches).toEqual([3])
  })

  it('leave requests refused before their handler out of every batch', async () => {
    const { app, batches, handled } = await buildBatchedApp()

    const responses = await Promise.all([
      app.inject({ url: '/echo/in', headers: { authorization: 'yes' } }),
      app.inject({ url: '/echo/out' })
    ])

    expect(responses.map((response) => response.statusCode)).toEqual([200, 401])
    expect(batches).toEqual([1])
    expect(handled).toEqual(['in'])
  })

  it('start a new batch in the turn after one ran', async () => {
    const { app, batches } = await buildBatchedApp()

    await app.inject({ url: '/echo/first', headers: { authorization: 'yes' } })
    await app.inject({ url: '/echo/second', headers: { authorization: 'yes' } })

    expect(batches).toEqual([1, 1])
  })
})
