import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { loadConfig, loadConfiguredTokens } from '../../src/config.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** The modules that read variables: config.ts, and the settings it delegates to. */
const CONFIG_SOURCE = ['src/config.ts', 'src/auth/jwt/jwt-settings.ts'].map((file) => readFileSync(join(ROOT, file), 'utf8')).join('\n')
const PAGE = readFileSync(join(ROOT, 'docs/reference/configuration.md'), 'utf8')

/** With tracing on and an identity provider as well, so that the OTLP and AUTH_JWT_* settings, read only then, count. */
const BASES = [{}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, { AUTH_JWT_ISSUER: 'https://id.example.com/realms/plants', AUTH_JWT_AUDIENCE: 'plantstore' }]

/** The variables config.ts reads, as it reads them: every name its loaders look up in `env`. */
function variablesReadByConfig (): Set<string> {
  const names = new Set<string>()
  const recording = (base: Record<string, string>) => new Proxy(base, {
    get (target, name) {
      if (typeof name === 'string') names.add(name)
      return target[name as string]
    },
    has (target, name) {
      if (typeof name === 'string') names.add(name)
      return name in target
    }
  })
  for (const base of BASES) {
    loadConfig(recording(base), false)
    loadConfiguredTokens(recording(base))
  }
  return names
}

/** The literal default config.ts falls back to for a variable, if it has one. */
function sourceDefaultOf (name: string): string | undefined {
  const quoted = `'${name}'`
  const patterns = [
    new RegExp(`integerVariable\\(env, ${quoted}, ([^,]+),`),
    new RegExp(`booleanVariable\\(env, ${quoted}, (\\w+)\\)`),
    new RegExp(`(?:valueOf|secretOf)\\(env, ${quoted}\\)\\)?\\s*\\?\\?\\s*('[^']*')`)
  ]
  for (const pattern of patterns) {
    const found = pattern.exec(CONFIG_SOURCE)?.[1]
    if (found !== undefined) return found
  }
  return undefined
}

interface Row {
  readonly variable: string
  readonly defaultCell: string
}

const cellsOf = (line: string): string[] => line.trim().replace(/^\||\|$/g, '').split('|').map((cell) => cell.trim())

/** The rows of the one table whose header begins `| variable | default |`. */
function documentedRows (): Row[] {
  const lines = PAGE.split('\n')
  const headers = lines.flatMap((line, index) => {
    const cells = cellsOf(line)
    return line.trim().startsWith('|') && cells[0]?.toLowerCase() === 'variable' && cells[1]?.toLowerCase() === 'default' ? [index] : []
  })
  expect(headers, 'docs/reference/configuration.md has exactly one table headed "| variable | default | …"').toHaveLength(1)
  const rows: Row[] = []
  for (const line of lines.slice(headers[0]! + 2)) {
    if (!line.trim().startsWith('|')) break
    const [first = '', defaultCell = ''] = cellsOf(line)
    const variable = /^`([A-Z][A-Z0-9_]*)`$/.exec(first)?.[1]
    expect(variable, `a row's first cell is one variable name in backticks: ${line}`).toBeDefined()
    rows.push({ variable: variable!, defaultCell })
  }
  return rows
}

/** OpenTelemetry's packages, as installed: the SDK and @fastify/otel read their own `OTEL_*` variables. */
function openTelemetrySources (): string {
  const texts: string[] = []
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder)) {
      const path = join(folder, entry)
      if (statSync(path).isDirectory()) {
        if (!['esm', 'esnext', 'test', 'types'].includes(entry)) walk(path)
      } else if (entry.endsWith('.js')) {
        texts.push(readFileSync(path, 'utf8'))
      }
    }
  }
  walk(join(ROOT, 'node_modules/@opentelemetry'))
  walk(join(ROOT, 'node_modules/@fastify/otel'))
  return texts.join('\n')
}

describe('docs/reference/configuration.md and src/config.ts', () => {
  const read = variablesReadByConfig()

  it('sees config.ts read its variables', () => {
    expect([...read]).toEqual(expect.arrayContaining(['PORT', 'DATABASE_URL', 'DATABASE_URL_FILE', 'PLANTSTORE_TOKENS_FILE', 'OTEL_EXPORTER_OTLP_PROTOCOL']))
  })

  it('documents every variable config.ts reads, once', () => {
    const documented = documentedRows().map((row) => row.variable)
    expect([...read].filter((name) => !documented.includes(name)), 'read by config.ts, missing from the table').toEqual([])
    expect(documented.filter((name, index) => documented.indexOf(name) !== index), 'rows for the same variable').toEqual([])
  })

  it('documents only variables that are read: by config.ts, or by the OpenTelemetry SDK itself', () => {
    const sdk = openTelemetrySources()
    const unread = documentedRows().map((row) => row.variable).filter((name) => !read.has(name) && !(name.startsWith('OTEL_') && sdk.includes(name)))
    expect(unread, 'documented, but nothing reads them').toEqual([])
  })

  it('gives the default config.ts uses for each of its variables', () => {
    const wrong: string[] = []
    for (const { variable, defaultCell } of documentedRows().filter((row) => read.has(row.variable))) {
      const documented = /^`([^`]*)`/.exec(defaultCell)?.[1]
      if (documented === undefined) {
        if (!/^(none|unset)\b/i.test(defaultCell)) wrong.push(`${variable}: the default cell starts with a value in backticks, or with "none" or "unset": ${defaultCell}`)
        const fallback = sourceDefaultOf(variable)
        if (fallback !== undefined) wrong.push(`${variable}: documented without a default, but config.ts falls back to ${fallback}`)
        continue
      }
      for (const base of BASES) {
        const unset = loadConfig(base, false)
        const setToDefault = loadConfig({ ...base, [variable]: documented }, false)
        try {
          expect(setToDefault).toEqual(unset)
        } catch {
          wrong.push(`${variable}=${documented} gives another configuration than leaving ${variable} unset${Object.keys(base).length > 0 ? ` (with ${Object.keys(base).join(' and ')} set)` : ''}`)
        }
      }
    }
    expect(wrong).toEqual([])
  })
})
