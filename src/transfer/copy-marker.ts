import { counted } from '../counted.js'
import type { CopyMarker, TargetState } from '../store/store-copy.js'

/** What a copy does with its target, decided from what the target holds before anything is written. */
export type CopyPlan =
  | { readonly action: 'start' }
  /** The target holds an unfinished copy of the same source: go on from its marker. */
  | { readonly action: 'resume', readonly marker: CopyMarker }
  /** Refused; `reason` completes "the target <url> …". */
  | { readonly action: 'refuse', readonly reason: string }

/**
 * A copy goes into an empty store, or on with its own unfinished copy there; with `merge`, into any
 * store. A store holds data when it holds a plant, a token or a webhook subscription: the `initial-admin`
 * token that a service makes on its first start counts, as the service would accept it. So does a change
 * log that numbered a change, even one whose plants are all deleted: the source's changes would take
 * numbers its readers have seen.
 */
export function planCopy (state: TargetState, source: string, merge: boolean): CopyPlan {
  const { marker } = state
  const unfinished = marker !== undefined && marker.finishedAt === undefined
  if (unfinished && marker.source === source) return { action: 'resume', marker }
  if (merge) return { action: 'start' }
  if (unfinished) {
    return {
      action: 'refuse',
      reason: `holds an unfinished copy of ${marker.source}, started ${new Date(marker.startedAt).toISOString()}: nothing was copied; ` +
        'run that copy\'s command again to finish it, or give --merge to copy this store into it as well'
    }
  }
  const held = heldData(state)
  if (held.length === 0) return { action: 'start' }
  const earlier = marker?.source === source && marker.finishedAt !== undefined
    ? ` (a copy of this store, finished ${new Date(marker.finishedAt).toISOString()})`
    : ''
  return {
    action: 'refuse',
    reason: `holds data: ${held.join(', ')}${earlier}; nothing was copied: copy into an empty store, ` +
      'or give --merge to add the source\'s rows to what it holds'
  }
}

function heldData (state: TargetState): string[] {
  const held: string[] = []
  if (state.plants > 0) held.push(counted(state.plants, 'plant', 'plants'))
  if (state.tokens === 1 && state.tokenNames[0] === 'initial-admin') {
    held.push('1 access token, "initial-admin", which the first start of a service on it made')
  } else if (state.tokens > 0) {
    const names = state.tokenNames.map((name) => JSON.stringify(name)).join(', ') + (state.tokens > state.tokenNames.length ? ', …' : '')
    held.push(`${counted(state.tokens, 'access token', 'access tokens')} (${names})`)
  }
  if (state.subscriptions > 0) held.push(counted(state.subscriptions, 'webhook subscription', 'webhook subscriptions'))
  if (state.changeLogHead > 0n) held.push(`a change log numbered up to ${state.changeLogHead}`)
  return held
}
