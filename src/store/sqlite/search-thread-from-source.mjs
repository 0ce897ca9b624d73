// The search thread's entry when plantstore runs from its TypeScript source (vitest, tsx): it loads
// search-thread.ts through tsx, registered for this one import, as writer-thread-from-source.mjs does for
// the writer. Production starts the compiled search-thread.js and never loads this file, nor tsx.
import { register } from 'tsx/esm/api'

const typescript = register({ namespace: 'plantstore-search-thread' })
await typescript.import('./search-thread.ts', import.meta.url)
await typescript.unregister()
