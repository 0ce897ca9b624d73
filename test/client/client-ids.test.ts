import { describe, expect, it } from 'vitest'
import { Plantstore, type Fetch } from '../../clients/typescript/src/index.js'
import { integerText } from '../../clients/typescript/src/integers.js'
import { jsonText, parseJson } from '../../clients/typescript/src/json.js'

/** A client whose fetch only counts: a call that reaches it made a request. */
function countingClient (): { ps: Plantstore, requests: () => number } {
  let requests = 0
  const fetch: Fetch = async () => {
    requests++
    return new Response('[]', { status: 200 })
  }
  return { ps: new Plantstore({ baseUrl: 'http://127.0.0.1:9', token: 't', fetch }), requests: () => requests }
}

const UNSAFE = 2 ** 53 + 2

describe('Ids as the client takes them', () => {
  it('turns a bigint, a safe number or canonical decimal text into the same canonical text', () => {
    expect(integerText(9007199254740993n, 'id')).toBe('9007199254740993')
    expect(integerText(-9223372036854775808n, 'id')).toBe('-9223372036854775808')
    expect(integerText('9223372036854775807', 'id')).toBe('9223372036854775807')
    expect(integerText(Number.MAX_SAFE_INTEGER, 'id')).toBe('9007199254740991')
    expect(integerText(-0, 'id')).toBe('0')
    expect(integerText('0', 'id')).toBe('0')
  })

  it('refuses a number beyond the safe range, a fraction and non-canonical text with a TypeError, and int64 overflow with a RangeError', () => {
    expect(() => integerText(UNSAFE, 'id')).toThrow(new TypeError('id 9007199254740994 is not a safe integer: pass a bigint or a decimal string to keep it exact'))
    for (const bad of [1.5, Number.NaN, Infinity]) expect(() => integerText(bad, 'id')).toThrow(TypeError)
    for (const bad of ['007', '-0', '+5', '1e2', '1.0', ' 1', '', 'abc']) expect(() => integerText(bad, 'id')).toThrow(TypeError)
    expect(() => integerText(true as unknown as bigint, 'id')).toThrow(TypeError)
    expect(() => integerText(2n ** 63n, 'id')).toThrow(RangeError)
    expect(() => integerText('-9223372036854775809', 'id')).toThrow(RangeError)
  })

  it('throws the TypeError of an unsafe number id before any request, in every call that takes an id', async () => {
    const { ps, requests } = countingClient()
    const calls: Array<() => Promise<unknown>> = [
      () => ps.plants.create({ id: UNSAFE, name: 'Fern' }),
      () => ps.plants.get(UNSAFE),
      () => ps.plants.replace(UNSAFE, { name: 'Fern' }),
      () => ps.plants.replace(1, { id: UNSAFE, name: 'Fern' }),
      () => ps.plants.update(UNSAFE, { tag: null }),
      () => ps.plants.delete(UNSAFE),
      () => ps.plants.batch([{ method: 'POST', body: { id: 1, name: 'a' } }, { method: 'DELETE', id: UNSAFE }]),
      () => ps.plants.batch([{ method: 'POST', body: { id: UNSAFE, name: 'a' } }]),
      () => ps.plants.list({ after: UNSAFE }).next(),
      () => ps.plants.history(UNSAFE).next(),
      () => ps.changes.follow({ after: UNSAFE }).next()
    ]
    for (const call of calls) await expect(call()).rejects.toThrow(TypeError)
    expect(requests()).toBe(0)
  })
})

describe('The client\'s options', () => {
  it('refuses a token no Authorization header can carry, and a base URL that is no URL', () => {
    for (const token of ['', 'two words', 'line\nbreak', 'naïve']) {
      expect(() => new Plantstore({ baseUrl: 'http://127.0.0.1:3000', token })).toThrow(new TypeError('token must be printable ASCII without spaces, as a bearer token is'))
    }
    expect(() => new Plantstore({ baseUrl: 'not a url', token: 't' })).toThrow(TypeError)
    expect(() => new Plantstore({ baseUrl: 'http://127.0.0.1:3000', token: 't', retries: -1 })).toThrow(RangeError)
  })
})

describe('JSON both ways', () => {
  it('writes bigints as exact JSON integers, and leaves undefined members out', () => {
    expect(jsonText({ id: -(2n ** 63n), name: 'a"b', tag: undefined, list: [1n, null, 'x'] }))
      .toBe('{"id":-9223372036854775808,"name":"a\\"b","list":[1,null,"x"]}')
  })

  it('reads integers beyond 2^53 as bigints, and the rest as JSON.parse does', () => {
    expect(parseJson('[9007199254740993,9007199254740991,1.5,"9007199254740993"]')).toEqual([9007199254740993n, 9007199254740991, 1.5, '9007199254740993'])
    expect(parseJson('{"id":1,"name":"x"}')).toEqual({ id: 1, name: 'x' })
  })
})
