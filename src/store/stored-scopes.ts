import { canonicalScopes, type Scope } from '../auth/scopes.js'

/** How a token's scopes are stored: separated by spaces, in canonical order, as in OAuth's `scope` parameter. */
export function scopesText (scopes: readonly Scope[]): string {
  return canonicalScopes(scopes).join(' ')
}

export function scopesOfText (text: string): Scope[] {
  return canonicalScopes(text.split(' '))
}
