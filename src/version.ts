import { createRequire } from 'node:module'

/** The release in package.json; src/ and dist/ both sit one level below it. */
export const SERVICE_VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version
