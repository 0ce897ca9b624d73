import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'

/**
 * The TLS examples of deploy/tls, checked without nginx or Caddy installed: both files are read into
 * directive trees (name, arguments, block) and what matters is looked up in them.
 */

interface Directive {
  readonly name: string
  readonly args: readonly string[]
  readonly block: readonly Directive[]
}

const NGINX_CONF = readFileSync(new URL('../../deploy/tls/nginx.conf', import.meta.url), 'utf8')
const CADDYFILE = readFileSync(new URL('../../deploy/tls/Caddyfile', import.meta.url), 'utf8')
/** The start line both files give for plantstore. */
const SERVICE_ENV = { HOST: '127.0.0.1', PORT: '3000', TRUST_PROXY: '127.0.0.1' }

/** Words, quoted strings ('…', "…" or `…`, quotes removed) and the punctuation `{`, `}`, `;` and line ends. */
function tokensOf (text: string): string[] {
  const tokens: string[] = []
  const pattern = /#[^\n]*|\n|[{};]|'([^']*)'|"([^"]*)"|`([^`]*)`|[^\s{};'"`]+/g
  for (const match of text.matchAll(pattern)) {
    if (match[0].startsWith('#')) continue
    tokens.push(match[1] ?? match[2] ?? match[3] ?? match[0])
  }
  return tokens
}

/** nginx ends a directive with `;`, the Caddyfile with a line end; both open blocks with `{`. */
function parse (text: string, end: ';' | '\n'): Directive[] {
  const tokens = tokensOf(text).filter((token) => end === '\n' || token !== '\n')
  let position = 0
  const block = (): Directive[] => {
    const directives: Directive[] = []
    let words: string[] = []
    while (position < tokens.length) {
      const token = tokens[position++] as string
      if (token === '}') break
      if (token === '{') {
        const [name = '', ...args] = words
        directives.push({ name, args, block: block() })
        words = []
      } else if (token === end) {
        const [name, ...args] = words
        if (name !== undefined) directives.push({ name, args, block: [] })
        words = []
      } else {
        words.push(token)
      }
    }
    return directives
  }
  return block()
}

const all = (directives: readonly Directive[], name: string): Directive[] =>
  directives.flatMap((directive) => [...(directive.name === name ? [directive] : []), ...all(directive.block, name)])
const only = (directives: readonly Directive[], name: string): Directive => {
  const found = all(directives, name)
  expect(found.map((directive) => directive.name), `one ${name}`).toEqual([name])
  return found[0] as Directive
}
const argsOf = (directives: readonly Directive[], name: string): readonly string[] => only(directives, name).args

/** nginx and Caddy sizes (`32k`, `32KiB`, `1m`) and durations (`55s`, `2m`) in bytes and seconds. */
function bytesOf (size: string): number {
  const [, digits = '', unit = ''] = /^(\d+)([a-z]*)$/i.exec(size) ?? []
  const factors: Record<string, number> = { '': 1, k: 1024, kib: 1024, m: 1024 ** 2, mib: 1024 ** 2 }
  return Number(digits) * (factors[unit.toLowerCase()] ?? Number.NaN)
}
function secondsOf (duration: string): number {
  const [, digits = '', unit = ''] = /^(\d+)(s|m)$/.exec(duration) ?? []
  return Number(digits) * (unit === 'm' ? 60 : 1)
}

/** An answer the proxy writes itself is plantstore's `Error` body, `error` equal to its status. */
function expectErrorBody (status: string | undefined, body: string | undefined): void {
  expect(JSON.parse(body ?? '')).toEqual({ error: Number(status), message: expect.any(String) })
}

const config = loadConfig(SERVICE_ENV, false)

describe('deploy/tls/nginx.conf', () => {
  const conf = parse(NGINX_CONF, ';')
  const servers = all(conf, 'server').filter((server) => server.block.length > 0)
  const [plain, tls] = [servers.find((server) => all(server.block, 'listen')[0]?.args[0] === '80'), servers.find((server) => all(server.block, 'listen')[0]?.args[0] === '443')]

  it('proxies to plantstore as the file says to start it, on 127.0.0.1:3000, which trusts that proxy', () => {
    expect(NGINX_CONF).toContain('HOST=127.0.0.1 PORT=3000 TRUST_PROXY=127.0.0.1')
    expect(argsOf(only(conf, 'upstream').block, 'server')).toEqual([`${config.host}:${config.port}`])
    expect(config.trustProxy).toBe('127.0.0.1')
    expect(all(conf, 'proxy_pass').map((directive) => directive.args)).toEqual([['http://plantstore']])
  })

  it('serves plain HTTP only to redirect to HTTPS (and for certificate challenges)', () => {
    expect(plain).toBeDefined()
    expect(all(plain?.block ?? [], 'proxy_pass')).toEqual([])
    expect(all(plain?.block ?? [], 'return').map((directive) => directive.args)).toEqual([['308', 'https://$host$request_uri']])
  })

  it('terminates TLS with HSTS on every answer, errors included', () => {
    expect(all(tls?.block ?? [], 'listen').map((directive) => directive.args)).toEqual([['443', 'ssl'], ['[::]:443', 'ssl']])
    expect(argsOf(tls?.block ?? [], 'ssl_protocols')).toEqual(['TLSv1.2', 'TLSv1.3'])
    const hsts = all(tls?.block ?? [], 'add_header').filter((directive) => directive.args[0] === 'Strict-Transport-Security')
    expect(hsts.length).toBeGreaterThan(0)
    for (const directive of hsts) {
      expect(directive.args).toEqual(['Strict-Transport-Security', 'max-age=31536000; includeSubDomains', 'always'])
    }
  })

  it('sends plantstore the client\'s address and the scheme, replacing what the client claimed', () => {
    const headers = Object.fromEntries(all(conf, 'proxy_set_header').map((directive) => [directive.args[0], directive.args[1]]))
    expect(headers).toMatchObject({ 'X-Forwarded-For': '$remote_addr', 'X-Forwarded-Proto': '$scheme', Host: '$host' })
  })

  it('lets every body plantstore accepts through, and keeps timeouts and keep-alive within the service\'s', () => {
    expect(bytesOf(argsOf(conf, 'client_max_body_size')[0] ?? '')).toBeGreaterThanOrEqual(config.bodyLimit)
    expect(secondsOf(argsOf(conf, 'client_header_timeout')[0] ?? '')).toBe(10)
    expect(secondsOf(argsOf(conf, 'client_body_timeout')[0] ?? '')).toBe(30)
    const upstreamKeepAlive = argsOf(only(conf, 'upstream').block, 'keepalive_timeout')[0] ?? ''
    expect(secondsOf(upstreamKeepAlive)).toBeLessThan(65)
  })

  it('answers its own refusals in the Error body', () => {
    const answers = all(conf, 'location').filter((location) => location.args[0]?.startsWith('@')).map((location) => argsOf(location.block, 'return'))
    expect(answers).toHaveLength(2)
    for (const [status, body] of answers) expectErrorBody(status, body)
    expect(answers[0]?.[1]).toContain(`larger than ${bytesOf(argsOf(conf, 'client_max_body_size')[0] ?? '')} bytes`)
  })

  it('never exposes the metrics port', () => {
    expect(NGINX_CONF.replace(/#[^\n]*/g, '')).not.toMatch(/9464|metrics/)
  })
})

describe('deploy/tls/Caddyfile', () => {
  const caddyfile = parse(CADDYFILE, '\n')
  const site = only(caddyfile, 'plants.example.com')

  it('proxies to plantstore as the file says to start it, on 127.0.0.1:3000, which trusts that proxy', () => {
    expect(CADDYFILE).toContain('HOST=127.0.0.1 PORT=3000 TRUST_PROXY=127.0.0.1')
    expect(only(site.block, 'reverse_proxy').args).toEqual([`${config.host}:${config.port}`])
  })

  it('sets HSTS, its own error answers included, and leaves the forwarded headers to Caddy, which drops the ones clients send', () => {
    const hsts = ['Strict-Transport-Security', 'max-age=31536000; includeSubDomains']
    expect(site.block.filter((directive) => directive.name === 'header').map((directive) => directive.args)).toEqual([hsts])
    const errorHandlers = site.block.filter((directive) => directive.name === 'handle_errors')
    expect(errorHandlers.map((handler) => handler.args)).toEqual([['413'], ['502', '503', '504']])
    for (const handler of errorHandlers) expect(handler.block.filter((directive) => directive.name === 'header')[0]?.args).toEqual(hsts)
    expect(all(caddyfile, 'trusted_proxies')).toEqual([])
    expect(all(caddyfile, 'header_up')).toEqual([])
  })

  it('lets every body plantstore accepts through, and keeps timeouts and keep-alive within the service\'s', () => {
    expect(bytesOf(argsOf(site.block, 'max_size')[0] ?? '')).toBeGreaterThanOrEqual(config.bodyLimit)
    expect(secondsOf(argsOf(caddyfile, 'read_header')[0] ?? '')).toBe(10)
    expect(secondsOf(argsOf(caddyfile, 'read_body')[0] ?? '')).toBe(30)
    expect(secondsOf(argsOf(site.block, 'keepalive')[0] ?? '')).toBeLessThan(65)
  })

  it('answers its own refusals in the Error body', () => {
    const answers = all(caddyfile, 'respond').map((directive) => directive.args)
    expect(answers).toHaveLength(2)
    for (const [body, status] of answers) expectErrorBody(status, body)
    expect(answers[0]?.[0]).toContain(`larger than ${bytesOf(argsOf(site.block, 'max_size')[0] ?? '')} bytes`)
  })

  it('never exposes the metrics port', () => {
    expect(CADDYFILE.replace(/#[^\n]*/g, '')).not.toMatch(/9464|metrics/)
  })
})
