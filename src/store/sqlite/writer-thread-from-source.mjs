// The writer thread's entry when plantstore runs from its TypeScript source (vitest, tsx): it loads
// writer-thread.ts through tsx, registered for this one import. Node 20's workers ignore `--import tsx`,
// and from Node 22 hooks a worker registers for all would apply to every thread of the process.
// Production starts the compiled writer-thread.js and never loads this file, nor tsx.
import { register } from 'tsx/esm/api'

const typescript = register({ namespace: 'plantstore-writer-thread' })
await typescript.import('./writer-thread.ts', import.meta.url)
await typescript.unregister()
