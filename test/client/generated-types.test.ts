import { readFileSync } from 'node:fs'
import type { OpenAPI3 } from 'openapi-typescript'
import { describe, expect, it } from 'vitest'
import { clientTypesOf } from '../../clients/typescript/scripts/generate-types.js'

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')

describe('The client\'s generated wire types', () => {
  it('are what openapi-typescript makes of openapi/openapi.json now (else: npm run generate-types in clients/typescript)', async () => {
    const document = JSON.parse(read('openapi/openapi.json')) as OpenAPI3
    expect(read('clients/typescript/src/generated/openapi.ts')).toBe(await clientTypesOf(document))
  })
})
