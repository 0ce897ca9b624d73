/** Bounded write load against a running service: `workers` loops of sequential POSTs until stopped. */
export interface WriteLoad {
  /** Ids answered 200, with the name they were sent with. */
  readonly acknowledged: Map<number, string>
  /** Ids that got another status or no answer (error, reset, refused). */
  readonly unanswered: Map<number, string>
  readonly statuses: Map<number, number>
  stop (): Promise<void>
}

export function startWriteLoad (
  baseUrl: string,
  token: string,
  options: { workers: number, firstId: number, maxRequests: number, onAcknowledged?: (count: number) => void }
): WriteLoad {
  const acknowledged = new Map<number, string>()
  const unanswered = new Map<number, string>()
  const statuses = new Map<number, number>()
  let nextId = options.firstId
  const state = { stopped: false }
  const worker = async () => {
    while (!state.stopped && nextId < options.firstId + options.maxRequests) {
      const id = nextId++
      const name = `load ${id} ${'\u{1F331}'.repeat(id % 3)}`
      try {
        const response = await fetch(`${baseUrl}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ id, name }),
          signal: AbortSignal.timeout(10_000)
        })
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
        if (response.status === 200) {
          acknowledged.set(id, name)
          options.onAcknowledged?.(acknowledged.size)
        } else unanswered.set(id, name)
        await response.arrayBuffer()
      } catch {
        unanswered.set(id, name)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  }
  const workers = Array.from({ length: options.workers }, worker)
  return {
    acknowledged,
    unanswered,
    statuses,
    async stop () {
      state.stopped = true
      await Promise.all(workers)
    }
  }
}

/** Resolves once `predicate` holds, polling every 20 ms; rejects after `timeoutMs`. */
export async function until (predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
