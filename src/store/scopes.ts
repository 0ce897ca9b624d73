/** What a token may do: each operation needs exactly one of these (docs/reference/api/authentication.md). */
export const SCOPES = ['plants:read', 'plants:write', 'admin'] as const
export type Scope = typeof SCOPES[number]

/** Scopes in their canonical order, without repeats: how they are stored and shown. */
export function canonicalScopes (scopes: Iterable<string>): Scope[] {
  const wanted = new Set(scopes)
  return SCOPES.filter((scope) => wanted.has(scope))
}

/** How a token's scopes are stored: separated by spaces, in canonical order, as in OAuth's `scope` parameter. */
export function scopesText (scopes: readonly Scope[]): string {
  return canonicalScopes(scopes).join(' ')
}

export function scopesOfText (text: string): Scope[] {
  return canonicalScopes(text.split(' '))
}
