import { readFileSync, writeFileSync } from 'node:fs'
import type { OpenAPI3 } from 'openapi-typescript'
import { clientTypesOf } from './generate-types.js'

/** `npm run generate-types`: writes src/generated/openapi.ts from the service's checked-in OpenAPI document. */
const document = JSON.parse(readFileSync(new URL('../../../openapi/openapi.json', import.meta.url), 'utf8')) as OpenAPI3
writeFileSync(new URL('../src/generated/openapi.ts', import.meta.url), await clientTypesOf(document))
