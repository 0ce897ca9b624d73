/**
 * The advisory locks plantstore takes on its database (arbitrary, fixed keys), one key per purpose: two
 * purposes sharing a key wait for each other. A token created while the search index was built once
 * deadlocked on that: the build waits for every older transaction, the token's waited for the build's key.
 */
export const ADVISORY_LOCK_KEYS = {
  /** Held by an instance's migration transaction; other starting instances wait for it. */
  migration: '7243190561180520497',
  /** Serializes token creates, so the check that a name is free and the insert cannot interleave. */
  accessTokens: '7243190561180520498',
  /** Held by the session that builds the search index; other instances leave the build to it. */
  searchIndexBuild: '7243190561180520499'
} as const
