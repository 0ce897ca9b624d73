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

const DURATION = /^([1-9][0-9]{0,8})(s|m|h|d)$/
const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3600_000, d: 24 * 3600_000 }
/** The longest duration a variable takes: ten years. */
const MAX_DURATION_MS = 3650 * 24 * 3600_000

/** A duration as a whole number and a unit: `90s`, `15m`, `36h`, `30d`; in milliseconds. */
export function durationVariable (env: Env, name: string, fallbackMs: number): number {
  const text = valueOf(env, name)
  if (text === undefined) return fallbackMs
  const match = DURATION.exec(text)
  const ms = match === null ? Number.NaN : Number(match[1]) * (UNIT_MS[match[2] as string] as number)
  if (!(ms <= MAX_DURATION_MS)) {
    throw new ConfigError(name, `must be a duration such as 90s, 15m, 36h or 30d (at most 3650d), got ${JSON.stringify(text)}`)
  }
  return ms
}
