import type { Scope } from '../store/scopes.js'

/** The scopes of a token as bits, so the per-request check is one AND. */
export type ScopeSet = number

const SCOPE_BIT: Readonly<Record<Scope, number>> = { 'plants:read': 1, 'plants:write': 2, admin: 4 }

export function isScope (value: string): value is Scope {
  return Object.hasOwn(SCOPE_BIT, value)
}

export function scopeSetOf (scopes: readonly Scope[]): ScopeSet {
  let set = 0
  for (const scope of scopes) set |= SCOPE_BIT[scope]
  return set
}

export function grants (set: ScopeSet, scope: Scope): boolean {
  return (set & SCOPE_BIT[scope]) !== 0
}

/** A token that plain `PLANTSTORE_TOKENS` entries and tokens of earlier releases carry. */
export const PLANT_SCOPES: readonly Scope[] = ['plants:read', 'plants:write']
