/** The help texts of `plantstore`: each printed by `--help` (or `-h`) at its level, on stdout. */

const EXIT_CODES = `Exit codes:
  0  success
  1  the operation failed: a live token already has the name, no such token, a token from the
     environment (cannot be revoked), the database is unavailable or cannot be opened, the
     configuration is invalid, or DATABASE_URL is "memory:"
  2  usage error: unknown command or option, missing or bad value
`

export const ENVIRONMENT = `Configuration: DATABASE_URL (or DATABASE_URL_FILE), PLANTSTORE_TOKENS (or PLANTSTORE_TOKENS_FILE) and the
other variables are read exactly as the service reads them, from the environment and from .env in the
working directory. Errors go to stderr, one line each, starting with "plantstore: ".
`

export const MAIN_USAGE = `Usage: plantstore <command> [options]

Works on a plantstore database directly, for operators who can reach the database: its access tokens
(a running service picks up a change within 2 seconds, without a restart), its backups, and its data.

Commands:
  tokens create   make an access token (its token is shown only then)
  tokens list     list the access tokens of the store and of PLANTSTORE_TOKENS
  tokens revoke   revoke an access token by id or name
  backup FILE     copy the running SQLite store to FILE, consistently
  restore FILE    replace the SQLite store (no service running) with a backup
  export          write the plants as NDJSON
  import FILE|-   create the plants of an NDJSON file
  copy            copy a whole store between SQLite and PostgreSQL
  webhooks reseal seal the stored webhook signing secrets with WEBHOOK_SECRETS_KEY

Options:
  -h, --help      show this help; "plantstore <command> --help" shows a command's own

${ENVIRONMENT}
${EXIT_CODES}`

export const TOKENS_USAGE = `Usage: plantstore tokens <command> [options]

Commands:
  create --name NAME --scopes SCOPE[,SCOPE...] [--expires-in DURATION] [--json]
  list [--json]
  revoke ID|NAME [--json]

Options:
  -h, --help      show this help; "plantstore tokens <command> --help" shows a command's own

${ENVIRONMENT}
${EXIT_CODES}`

export const CREATE_USAGE = `Usage: plantstore tokens create --name NAME --scopes SCOPE[,SCOPE...] [--expires-in DURATION] [--json]

Makes an access token and prints it on its own line: the only time it is ever shown (the store keeps only
its SHA-256 digest). Every service instance on the database accepts it within 2 seconds.

Options:
  --name NAME             1 to 64 characters of A-Z a-z 0-9 . _ -, not the name of another live token
                          (of the store or of PLANTSTORE_TOKENS)
  --scopes SCOPES         comma-separated, no repeats, at least one of:
                            plants:read   GET /plants, GET /plants/{id}
                            plants:write  POST, PUT, PATCH, DELETE on /plants...
                            admin         everything under /admin/...
  --expires-in DURATION   a positive whole number and a unit: s, m, h, d or w (like 90m or 30d);
                          without it the token does not expire
  --json                  print one JSON document: {id, name, scopes, createdAt, expiresAt?, token}
  -h, --help              show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const LIST_USAGE = `Usage: plantstore tokens list [--json]

Lists every access token, live, expired and revoked, of the store and of PLANTSTORE_TOKENS (source
"environment"), newest first. Neither tokens nor their digests are shown.

Options:
  --json         print one JSON array of {id, name, scopes, source, createdAt, expiresAt?, revokedAt?}
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const REVOKE_USAGE = `Usage: plantstore tokens revoke ID|NAME [--json]

Revokes the token with this id, or else the live token with this name. Every service instance on the
database refuses it (401) within 2 seconds. Revoking a revoked token changes nothing. Tokens of
PLANTSTORE_TOKENS cannot be revoked here: remove them from the token file and send SIGHUP to the service,
or from PLANTSTORE_TOKENS and restart it.

Options:
  --json         print the revoked token as one JSON document:
                 {id, name, scopes, source, createdAt, expiresAt?, revokedAt}
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`
