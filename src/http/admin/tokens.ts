import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { tokenRecordDocument, tokenViewDocument } from '../../auth/token-documents.js'
import type { AccessTokenRegistry } from '../../auth/token-registry.js'
import {
  accessTokenNameTaken, accessTokenNotFound, environmentTokenNotRevocable, invalidRequest
} from '../../errors.js'
import { ref } from '../../schemas/kinds.js'
import { AccessToken, AccessTokenIdParams, AccessTokenList, CreatedAccessToken, NewAccessToken } from '../../schemas/tokens.js'
import { bearerSecurity } from '../docs.js'
import { authenticatedOperationErrors, pathParameterErrors, bodyErrors, createdWithSecret, errorResponses } from '../responses.js'

const ADMIN_SECURITY = bearerSecurity('admin')

/** `/admin/tokens`: access tokens as data (docs/reference/api/tokens.md). */
export async function accessTokenRoutes (app: FastifyInstance, options: { readonly accessTokens: AccessTokenRegistry }): Promise<void> {
  const { accessTokens } = options
  const tokens = app.withTypeProvider<TypeBoxTypeProvider>()

  tokens.post('', {
    schema: {
      operationId: 'createAccessToken',
      summary: 'Create an access token',
      description: 'Makes a token with a name, scopes and an optional expiry. The answer holds the token ' +
        'itself, for the only time: store it now. Every instance on the same store accepts it within 2 seconds; ' +
        'the one that answers, before it answers.',
      tags: ['tokens'],
      security: ADMIN_SECURITY,
      body: ref(NewAccessToken),
      response: {
        201: createdWithSecret(CreatedAccessToken, 'The token is made', 'The path of the token: /admin/tokens/{id}'),
        ...authenticatedOperationErrors,
        ...bodyErrors,
        409: errorResponses.tokenNameTaken
      }
    }
  }, async (request, reply) => {
    const { name, scopes, expiresAt: expiresAtText } = request.body
    const expiresAt = expiresAtText === undefined ? undefined : new Date(expiresAtText.toUpperCase())
    if (expiresAt !== undefined && expiresAt.getTime() <= Date.now()) throw invalidRequest('expiresAt must be in the future')
    const result = await accessTokens.create(expiresAt === undefined ? { name, scopes } : { name, scopes, expiresAt })
    if (result.status === 'name-taken') throw accessTokenNameTaken(name)
    request.log.info({ accessToken: { id: result.token.id, name: result.token.name, scopes: result.token.scopes } }, 'access token created')
    return reply.code(201)
      .header('location', `/admin/tokens/${result.token.id}`)
      .header('cache-control', 'no-store')
      .send({ ...tokenRecordDocument(result.token), token: result.secret })
  })

  tokens.get('', {
    schema: {
      operationId: 'listAccessTokens',
      summary: 'List access tokens',
      description: 'Every token, live, expired and revoked, of both sources (`store` and `environment`), ' +
        'newest first, without the tokens themselves or their digests.',
      tags: ['tokens'],
      security: ADMIN_SECURITY,
      response: {
        200: { ...AccessTokenList, description: 'The tokens' },
        ...authenticatedOperationErrors
      }
    }
  }, async (_request, reply) => {
    return reply.header('cache-control', 'no-store').send((await accessTokens.list()).map(tokenViewDocument))
  })

  tokens.get('/:id', {
    schema: {
      operationId: 'getAccessToken',
      summary: 'Read an access token',
      description: 'The token with this id, without the token itself or its digest.',
      tags: ['tokens'],
      security: ADMIN_SECURITY,
      params: AccessTokenIdParams,
      response: {
        200: { ...ref(AccessToken), description: 'The token' },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses.tokenNotFound
      }
    }
  }, async (request, reply) => {
    const { id } = request.params
    const token = (await accessTokens.list()).find((candidate) => candidate.id === id)
    if (token === undefined) throw accessTokenNotFound(id)
    return reply.header('cache-control', 'no-store').send(tokenViewDocument(token))
  })

  tokens.delete('/:id', {
    schema: {
      operationId: 'revokeAccessToken',
      summary: 'Revoke an access token',
      description: 'From now on the token gets 401 on this instance, and within 2 seconds on every other ' +
        'instance on the same store; requests already under way finish. Revoking a revoked token changes ' +
        'nothing. A token may revoke itself. Tokens from PLANTSTORE_TOKENS cannot be revoked here (409).',
      tags: ['tokens'],
      security: ADMIN_SECURITY,
      params: AccessTokenIdParams,
      response: {
        204: { type: 'null', description: 'The token is revoked' },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses.tokenNotFound,
        ...bodyErrors,
        409: errorResponses.tokenNotRevocable
      }
    }
  }, async (request, reply) => {
    const { id } = request.params
    const result = await accessTokens.revoke(id)
    if (result.status === 'not-found') throw accessTokenNotFound(id)
    if (result.status === 'environment') throw environmentTokenNotRevocable(result.token.name)
    request.log.info({ accessToken: { id: result.token.id, name: result.token.name } }, 'access token revoked')
    return reply.code(204).send()
  })
}
