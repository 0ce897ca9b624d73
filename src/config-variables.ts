/** The building blocks of reading environment variables: every reader of a variable uses these. */

export type Env = Readonly<Record<string, string | undefined>>

/** Reads one variable for `loadConfig`: a ConfigError it throws is collected, and `fallback` stands in. */
export type ReadVariable = <T>(variable: () => T, fallback: T) => T

export class ConfigError extends Error {
  constructor (readonly variable: string, rule: string) {
    super(`${variable} ${rule}`)
    this.name = 'ConfigError'
  }
}

/** A variable's value; unset and empty are the same. */
export function valueOf (env: Env, name: string): string | undefined {
  const value = env[name]
  return value === undefined || value === '' ? undefined : value
}

export function integerVariable (env: Env, name: string, fallback: number, min: number, max: number): number {
  const text = valueOf(env, name)
  if (text === undefined) return fallback
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`)
  }
  return value
}

export function booleanVariable (env: Env, name: string, fallback: boolean): boolean {
  const text = valueOf(env, name)
  if (text === undefined) return fallback
  if (text === 'true' || text === 'false') return text === 'true'
  throw new ConfigError(name, `must be "true" or "false", got ${JSON.stringify(text)}`)
}
