const SIGNALS = { SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const

/**
 * Runs `work`; if the process is interrupted (Ctrl-C, SIGTERM, a closed terminal) before it ends,
 * runs `cleanup` (which must be synchronous: it removes what the work half-made), says so in one line on
 * stderr, ending with `afterwards`, and exits with 128 + the signal's number, as a shell reports it.
 */
export async function unlessInterrupted<T> (cleanup: () => void, work: () => Promise<T>, afterwards = 'nothing was left half-written'): Promise<T> {
  const handlers = Object.entries(SIGNALS).map(([signal, number]) => {
    const handler = (): void => {
      cleanup()
      process.stderr.write(`plantstore: interrupted by ${signal}; ${afterwards}\n`)
      process.exit(128 + number)
    }
    process.once(signal, handler)
    return () => process.off(signal, handler)
  })
  try {
    return await work()
  } finally {
    for (const remove of handlers) remove()
  }
}
