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

type WriteMethod = 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/** One write a lifecycle load sent for a plant, and the plant's JSON document once it took effect (undefined: no plant). */
export interface PlantWrite {
  readonly method: WriteMethod
  readonly document: string | undefined
  readonly acknowledged: boolean
}

/** Bounded lifecycle load: `workers` loops that each create a plant, then replace, patch or delete it, one request at a time. */
export interface LifecycleLoad {
  /** Every plant's writes in the order they were sent; each was sent only after the one before it was acknowledged. */
  readonly writes: Map<number, PlantWrite[]>
  /** Answers that broke the contract (a wrong status or body): none expected. */
  readonly wrongAnswers: string[]
  stop (): Promise<void>
}

interface LifecycleStep {
  readonly method: WriteMethod
  /** The JSON body and its media type; none for a DELETE. */
  readonly body?: { readonly contentType: string, readonly of: (id: number) => object }
  /** The plant after this step (undefined: none), given the plant before it. */
  readonly apply: (id: number, before: StoredPlant | undefined) => StoredPlant | undefined
}

interface StoredPlant { readonly id: number, readonly name: string, readonly tag?: string }

const sprout = (id: number) => '\u{1F331}'.repeat(id % 3)
const create: LifecycleStep = {
  method: 'POST',
  body: { contentType: 'application/json', of: (id) => ({ id, name: `load ${id} ${sprout(id)}` }) },
  apply: (id) => ({ id, name: `load ${id} ${sprout(id)}` })
}
const replace: LifecycleStep = {
  method: 'PUT',
  body: { contentType: 'application/json', of: (id) => ({ name: `replaced ${id} ${sprout(id + 1)}`, tag: `t${id % 7}` }) },
  apply: (id) => ({ id, name: `replaced ${id} ${sprout(id + 1)}`, tag: `t${id % 7}` })
}
const tagPatch: LifecycleStep = {
  method: 'PATCH',
  body: { contentType: 'application/merge-patch+json', of: (id) => ({ tag: `patched ${id}` }) },
  apply: (id, before) => ({ id, name: before?.name ?? '', tag: `patched ${id}` })
}
const untagPatch: LifecycleStep = {
  method: 'PATCH',
  body: { contentType: 'application/merge-patch+json', of: () => ({ tag: null }) },
  apply: (id, before) => ({ id, name: before?.name ?? '' })
}
const remove: LifecycleStep = {
  method: 'DELETE',
  apply: () => undefined
}
/** The lives of plants, by id modulo their number: of different lengths, so that the workers' phases drift apart. */
const LIVES: ReadonlyArray<readonly LifecycleStep[]> = [
  [create, replace, tagPatch],
  [create, tagPatch, remove],
  [create, replace, tagPatch, untagPatch],
  [create, replace],
  [create, replace, remove]
]

/** A plant's JSON document as reads return it: keys id, name, tag, no tag key when it has none. */
const documentOf = (plant: StoredPlant | undefined) => plant === undefined ? undefined : JSON.stringify(plant)

/**
 * Runs the lives of plants `firstId`, `firstId + 1`, … (at most `maxPlants`). A write that is not
 * acknowledged (a 200 with the expected body; for a DELETE a 204 without one) ends its plant's life, so
 * every write of a plant but its last was acknowledged, and each write's `document` is exactly what it
 * makes of the plant.
 */
export function startLifecycleLoad (
  baseUrl: string,
  token: string,
  options: { workers: number, firstId: number, maxPlants: number, onAcknowledged?: (count: number) => void }
): LifecycleLoad {
  const writes = new Map<number, PlantWrite[]>()
  const wrongAnswers: string[] = []
  let acknowledgedCount = 0
  let nextId = options.firstId
  const state = { stopped: false }

  /** Sends one write; true when it was acknowledged with the expected answer. */
  const send = async (id: number, step: LifecycleStep, after: StoredPlant | undefined): Promise<boolean> => {
    const url = step.method === 'POST' ? `${baseUrl}/plants` : `${baseUrl}/plants/${id}`
    const history = writes.get(id) ?? []
    writes.set(id, history)
    const document = documentOf(after)
    let acknowledged = false
    try {
      const response = await fetch(url, {
        method: step.method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(step.body === undefined ? {} : { 'content-type': step.body.contentType })
        },
        ...(step.body === undefined ? {} : { body: JSON.stringify(step.body.of(id)) }),
        signal: AbortSignal.timeout(10_000)
      })
      const text = await response.text()
      const expected = expectedAnswer(step.method, after)
      acknowledged = response.status === expected.status && text === expected.body
      if (!acknowledged && response.status !== 503) {
        wrongAnswers.push(`${step.method} ${id}: ${response.status} ${text}, expected ${expected.status} ${expected.body}`)
      }
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    history.push({ method: step.method, document, acknowledged })
    if (acknowledged) options.onAcknowledged?.(++acknowledgedCount)
    return acknowledged
  }

  const worker = async () => {
    while (!state.stopped && nextId < options.firstId + options.maxPlants) {
      const id = nextId++
      let plant: StoredPlant | undefined
      for (const step of LIVES[id % LIVES.length] as readonly LifecycleStep[]) {
        if (state.stopped) break
        const after = step.apply(id, plant)
        if (!await send(id, step, after)) break
        plant = after
      }
    }
  }
  const workers = Array.from({ length: options.workers }, worker)
  return {
    writes,
    wrongAnswers,
    async stop () {
      state.stopped = true
      await Promise.all(workers)
    }
  }
}

/**
 * The answer that acknowledges a write leaving `after`: a POST answers the plant without its id, a PUT
 * or a PATCH its document, a DELETE (which leaves no plant) a 204 without a body.
 */
function expectedAnswer (method: WriteMethod, after: StoredPlant | undefined): { status: number, body: string } {
  if (after === undefined) return { status: 204, body: '' }
  if (method === 'POST') return { status: 200, body: JSON.stringify({ name: after.name, ...(after.tag === undefined ? {} : { tag: after.tag }) }) }
  return { status: 200, body: JSON.stringify(after) }
}

/**
 * The documents a plant may have after a crash (undefined: no plant), given its writes in order: the
 * result of the last acknowledged write (no plant before any), or of any write sent after it, which got
 * no answer and so may or may not have taken effect. When the last write was acknowledged, exactly its
 * result.
 */
export function survivingDocuments (writes: readonly PlantWrite[]): Array<string | undefined> {
  const lastAcknowledged = writes.findLastIndex((write) => write.acknowledged)
  const unanswered = writes.slice(lastAcknowledged + 1).map((write) => write.document)
  return [lastAcknowledged === -1 ? undefined : writes[lastAcknowledged]?.document, ...unanswered]
}
