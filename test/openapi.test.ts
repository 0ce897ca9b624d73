import { readFileSync } from 'node:fs'
import SwaggerParser from '@apidevtools/swagger-parser'
import { describe, expect, it } from 'vitest'
import { buildTestApp } from './helper.js'

const CHECKED_IN = new URL('../openapi/openapi.json', import.meta.url)

describe('The OpenAPI document', () => {
  it('served at /openapi.json without a token is identical to openapi/openapi.json (run `npm run openapi` after a change)', async () => {
    const app = await buildTestApp()

    const response = await app.inject({ method: 'GET', url: '/openapi.json' })

    expect(response.statusCode).toBe(200)
    expect(response.json()).toEqual(JSON.parse(readFileSync(CHECKED_IN, 'utf8')))
  })

  it('is valid OpenAPI 3.1', async () => {
    const app = await buildTestApp()
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()

    const validated = await SwaggerParser.validate(structuredClone(document))

    expect(document.openapi).toBe('3.1.0')
    expect(validated.info.title).toBe('plantstore')
  })

  it('names the shared schemas as components, with the seed fields and int64 ids', async () => {
    const app = await buildTestApp()
    const { components } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()

    expect(Object.keys(components.schemas)).toEqual(expect.arrayContaining(['Plant', 'NewPlant', 'Error']))
    expect(components.schemas.NewPlant.required).toEqual(['id', 'name'])
    expect(components.schemas.NewPlant.properties.id).toMatchObject({ type: 'integer', format: 'int64' })
    expect(components.schemas.Plant.required).toEqual(['name'])
    expect(components.schemas.Plant.properties.name).toMatchObject({ type: 'string', minLength: 1, maxLength: 256 })
    expect(components.schemas.Error.required).toEqual(['error', 'message'])
    expect(components.schemas.Error.properties.error).toMatchObject({ type: 'integer', format: 'int32' })
    expect(components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
  })

  it('declares every status POST /plants can answer, each error with the shared Error schema', async () => {
    const app = await buildTestApp()
    const { paths } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const operation = paths['/plants'].post

    expect(Object.keys(operation.responses).sort()).toEqual(['200', '400', '401', '409', '413', '415', '500', '503'])
    for (const [status, response] of Object.entries<{ content: Record<string, { schema: unknown }> }>(operation.responses)) {
      const schema = response.content['application/json']?.schema
      expect(schema).toEqual({ $ref: status === '200' ? '#/components/schemas/Plant' : '#/components/schemas/Error' })
    }
    expect(operation.security).toEqual([{ bearerAuth: [] }])
    expect(operation.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/NewPlant' })
  })

  it('is explorable in Swagger UI at /docs without a token', async () => {
    const app = await buildTestApp()

    const page = await app.inject({ method: 'GET', url: '/docs/' })
    const initializer = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' })

    expect(page.statusCode).toBe(200)
    expect(page.headers['content-type']).toMatch(/^text\/html/)
    expect(page.body).toContain('swagger-ui')
    expect(initializer.statusCode).toBe(200)
  })
})
