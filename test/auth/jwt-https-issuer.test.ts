import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, type RequestListener } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { Server, Socket } from 'node:net'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { generateSigningKey, type TestSigningKey } from '../helpers/identity-provider.js'
import { claimsFor, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'
import { startServer } from '../helpers/server-process.js'
import { keySetLines, untilKeySetLines } from '../helpers/key-set-lines.js'
import { signCompact } from '../helpers/signing-keys.js'
import { listenOnLoopback } from '../helpers/test-servers.js'

// The built server against an identity provider served over real TLS: the service trusts the test's
// own CA only through NODE_EXTRA_CA_CERTS, and refuses a key set that would leave https.

const SERVICE_TOKEN = 'plantstore-https-issuer-token-3a9c1e'
const ISSUER_PATH = '/realms/plants'
const DISCOVERY_PATH = `${ISSUER_PATH}/.well-known/openid-configuration`
const JWKS_PATH = `${ISSUER_PATH}/protocol/openid-connect/certs`
const INVALID_TOKEN_BODY = '{"error":401,"message":"the bearer token is missing, malformed or not accepted"}'
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'

let key: TestSigningKey
/** A key the provider never published: what an attacker on the network would sign with. */
let intruderKey: TestSigningKey

beforeAll(async () => {
  [key, intruderKey] = await Promise.all([generateSigningKey('RS256', 'https-rsa'), generateSigningKey('RS256', 'intruder-rsa')])
})

interface Certificates {
  /** The CA's certificate, for NODE_EXTRA_CA_CERTS. */
  readonly caPath: string
  readonly key: Buffer
  readonly cert: Buffer
}

/** A throwaway CA and, signed by it, a server certificate for IP 127.0.0.1, made by the openssl command. */
function makeCertificates (): Certificates {
  const folder = temporaryFolder()
  const at = (name: string) => join(folder, name)
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] })
  const newEcKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  openssl('req', '-x509', ...newEcKey, '-keyout', at('ca.key'), '-out', at('ca.pem'), '-days', '1', '-subj', '/CN=plantstore test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
  openssl('req', '-new', ...newEcKey, '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1')
  writeFileSync(at('server.ext'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n')
  openssl('x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-set_serial', '1', '-days', '1',
    '-extfile', at('server.ext'), '-out', at('server.pem'))
  return { caPath: at('ca.pem'), key: readFileSync(at('server.key')), cert: readFileSync(at('server.pem')) }
}

/** What a path answers: a JSON document (200), or a 302 to another URL. */
type Answer = { readonly json: object } | { readonly redirectTo: string }

interface DocumentServer {
  /** `https://127.0.0.1:<port>` with certificates, else `http://…`. */
  readonly origin: string
  /** The path of every request, in order. */
  readonly requested: readonly string[]
  /** What each path answers; any other path is a 404. */
  answers: Record<string, Answer>
}

/** Serves documents on 127.0.0.1, over TLS with `certificates`; closed (open connections destroyed) when the test ends. */
async function serveDocuments (certificates?: Certificates): Promise<DocumentServer> {
  const requested: string[] = []
  let answers: Record<string, Answer> = {}
  const handle: RequestListener = (request, response) => {
    const path = request.url ?? '/'
    requested.push(path)
    const answer = answers[path]
    if (answer === undefined) response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}')
    else if ('redirectTo' in answer) response.writeHead(302, { location: answer.redirectTo }).end()
    else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer.json))
  }
  const server = certificates === undefined ? createHttpServer(handle) : createHttpsServer({ key: certificates.key, cert: certificates.cert }, handle)
  const port = await listenClosingConnections(server)
  return {
    origin: `${certificates === undefined ? 'http' : 'https'}://127.0.0.1:${port}`,
    requested,
    get answers () { return answers },
    set answers (next) { answers = next }
  }
}

async function listenClosingConnections (server: Server): Promise<number> {
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  return listenOnLoopback(server, () => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy()
    server.close(() => { resolve() })
  }))
}

/** An https provider whose discovery document names `jwksUri` (its own key set unless given) under the issuer `<origin>/realms/plants`. */
async function httpsProvider (certificates: Certificates, jwksUri?: (origin: string) => string) {
  const provider = await serveDocuments(certificates)
  const issuer = `${provider.origin}${ISSUER_PATH}`
  provider.answers = {
    [DISCOVERY_PATH]: { json: { issuer, jwks_uri: jwksUri?.(provider.origin) ?? `${provider.origin}${JWKS_PATH}`, id_token_signing_alg_values_supported: ['RS256'] } },
    [JWKS_PATH]: { json: { keys: [key.publicJwk] } }
  }
  return { provider, issuer }
}

/** A plain http server that would answer the real key set at JWKS_PATH. */
async function httpKeySet (): Promise<DocumentServer & { readonly jwksUrl: string }> {
  const server = await serveDocuments()
  server.answers = { [JWKS_PATH]: { json: { keys: [key.publicJwk] } } }
  return Object.assign(server, { jwksUrl: `${server.origin}${JWKS_PATH}` })
}

function serviceEnv (issuer: string, certificates?: Certificates): Record<string, string> {
  return {
    DATABASE_URL: 'memory:',
    PLANTSTORE_TOKENS: SERVICE_TOKEN,
    AUTH_JWT_ISSUER: issuer,
    AUTH_JWT_AUDIENCE: TEST_AUDIENCE,
    LOG_LEVEL: 'info',
    ...(certificates === undefined ? {} : { NODE_EXTRA_CA_CERTS: certificates.caPath })
  }
}

/** A valid RS256 access token from `issuer`, signed with the published key unless `signer` is given. */
function tokenFrom (issuer: string, signer = key): Promise<string> {
  return signCompact(new TextEncoder().encode(JSON.stringify(claimsFor({ issuer }))), { alg: signer.alg, kid: signer.kid, typ: 'JWT' }, signer)
}

async function getPlants (baseUrl: string, token: string): Promise<{ status: number, body: string, challenge: string | null }> {
  const response = await fetch(`${baseUrl}/plants`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) })
  return { status: response.status, body: await response.text(), challenge: response.headers.get('www-authenticate') }
}

/** The message of the TLS error this Node's fetch gives for `url`, whose certificate it does not trust. */
async function untrustedCertificateMessage (url: string): Promise<string> {
  const error: unknown = await fetch(url).then(() => undefined, (failure: unknown) => failure)
  if (!(error instanceof Error) || !(error.cause instanceof Error)) throw new Error(`${url} was fetched, or failed without a cause`)
  return error.cause.message
}

function failedLine (reason: string): { level: number, msg: string } {
  return {
    level: 40,
    msg: `cannot fetch the identity provider's keys (${reason}); JWTs signed with keys fetched before keep working, and service tokens are unaffected`
  }
}

describe('The built server with an https issuer, over real TLS', () => {
  it('when discovery and key set are https and the CA is trusted, then a JWT is accepted and nothing is logged about the keys', async () => {
    const certificates = makeCertificates()
    const { provider, issuer } = await httpsProvider(certificates)
    const server = await startServer(serviceEnv(issuer, certificates))

    expect(await getPlants(server.baseUrl, await tokenFrom(issuer))).toEqual({ status: 200, body: '[]', challenge: null })
    expect(provider.requested).toEqual([DISCOVERY_PATH, JWKS_PATH])
    expect(keySetLines(server)).toEqual([])
  })

  it('when the discovery document names an http jwks_uri, then the key set is not fetched, one warning says why, and a JWT is a 401', async () => {
    const certificates = makeCertificates()
    const plain = await httpKeySet()
    const { provider, issuer } = await httpsProvider(certificates, () => plain.jwksUrl)
    const server = await startServer(serviceEnv(issuer, certificates))

    const refused = await getPlants(server.baseUrl, await tokenFrom(issuer))

    expect(refused).toEqual({ status: 401, body: INVALID_TOKEN_BODY, challenge: INVALID_TOKEN_CHALLENGE })
    await untilKeySetLines(server, 1)
    expect(keySetLines(server)).toEqual([failedLine(
      `the discovery document at ${provider.origin}${DISCOVERY_PATH} names a jwks_uri that is not https under an https issuer`
    )])
    expect(provider.requested).toEqual([DISCOVERY_PATH])
    expect(plain.requested).toEqual([])
    expect((await getPlants(server.baseUrl, SERVICE_TOKEN)).status).toBe(200)
  })

  it('when the https key set redirects to an http URL, then the key set is refused, one warning says why, and the service token still works', async () => {
    const certificates = makeCertificates()
    const plain = await httpKeySet()
    const { provider, issuer } = await httpsProvider(certificates)
    provider.answers = { ...provider.answers, [JWKS_PATH]: { redirectTo: plain.jwksUrl } }
    const server = await startServer(serviceEnv(issuer, certificates))

    const refused = await getPlants(server.baseUrl, await tokenFrom(issuer))

    expect(refused).toEqual({ status: 401, body: INVALID_TOKEN_BODY, challenge: INVALID_TOKEN_CHALLENGE })
    await untilKeySetLines(server, 1)
    expect(keySetLines(server)).toEqual([failedLine(`${provider.origin}${JWKS_PATH} redirected to a URL that is not https`)])
    expect(provider.requested).toEqual([DISCOVERY_PATH, JWKS_PATH])
    expect(plain.requested).toEqual([])
    expect(await getPlants(server.baseUrl, SERVICE_TOKEN)).toEqual({ status: 200, body: '[]', challenge: null })
  })

  // Were only the last URL of the redirects checked, a chain that leaves https and comes back (https → http
  // → https) would pass: whoever answers the http hop (anyone on the path) would name a key set of its
  // choice on any host with a valid certificate (here another path of the provider's host stands in for it).
  it('when the https key set redirects to http, which redirects back to https, then the key set is still refused', async () => {
    const certificates = makeCertificates()
    const plain = await serveDocuments()
    const { provider, issuer } = await httpsProvider(certificates)
    provider.answers = {
      ...provider.answers,
      [JWKS_PATH]: { redirectTo: `${plain.origin}${JWKS_PATH}` },
      '/intruder/certs': { json: { keys: [intruderKey.publicJwk] } }
    }
    plain.answers = { [JWKS_PATH]: { redirectTo: `${provider.origin}/intruder/certs` } }
    const server = await startServer(serviceEnv(issuer, certificates))

    const forged = await getPlants(server.baseUrl, await tokenFrom(issuer, intruderKey))

    expect(forged).toEqual({ status: 401, body: INVALID_TOKEN_BODY, challenge: INVALID_TOKEN_CHALLENGE })
    await untilKeySetLines(server, 1)
    expect(keySetLines(server)).toEqual([failedLine(`${provider.origin}${JWKS_PATH} redirected to a URL that is not https`)])
    expect(plain.requested).toEqual([])
  })

  it('when the service does not trust the CA (no NODE_EXTRA_CA_CERTS), then the warning names the certificate problem and a JWT is a 401', async () => {
    const certificates = makeCertificates()
    const { provider, issuer } = await httpsProvider(certificates)
    const server = await startServer(serviceEnv(issuer))

    const refused = await getPlants(server.baseUrl, await tokenFrom(issuer))

    expect(refused).toEqual({ status: 401, body: INVALID_TOKEN_BODY, challenge: INVALID_TOKEN_CHALLENGE })
    await untilKeySetLines(server, 1)
    // Node 26 follows the reason with a hint of its own: the line carries whatever this Node says.
    const nodeSays = await untrustedCertificateMessage(`${provider.origin}${DISCOVERY_PATH}`)
    expect(nodeSays).toMatch(/^unable to verify the first certificate(;|$)/)
    expect(keySetLines(server)).toEqual([failedLine(`${provider.origin}${DISCOVERY_PATH} cannot be fetched: ${nodeSays}`)])
    expect(provider.requested).toEqual([])
  })
})
