/** The parts that the help texts of several commands share. */

export const ENVIRONMENT = `Configuration: DATABASE_URL (or DATABASE_URL_FILE), PLANTSTORE_TOKENS (or PLANTSTORE_TOKENS_FILE) and the
other variables are read exactly as the service reads them, from the environment and from .env in the
working directory. Errors go to stderr, one line each, starting with "plantstore: ".
`

/** The exit codes of `plantstore` and of its tokens commands. */
export const EXIT_CODES = `Exit codes:
  0  success
  1  the operation failed: a live token already has the name, no such token, a token from the
     environment (cannot be revoked), the database is unavailable or cannot be opened, the
     configuration is invalid, or DATABASE_URL is "memory:"
  2  usage error: unknown command or option, missing or bad value
`

/** The exit codes of the commands that move a store's data. */
export const DATA_EXIT_CODES = `Exit codes:
  0  success
  1  the command failed, or (import, copy --merge) it finished but some lines or rows were not taken:
     the reasons are on stderr, one line each
  2  usage error: unknown command or option, missing or bad value
`
