/** The help texts of the commands that move a store's data: backup, restore, export, import, copy. */
import { ENVIRONMENT } from './usage.js'

const EXIT_CODES = `Exit codes:
  0  success
  1  the command failed, or (import, copy --merge) it finished but some lines or rows were not taken:
     the reasons are on stderr, one line each
  2  usage error: unknown command or option, missing or bad value
`

export const BACKUP_USAGE = `Usage: plantstore backup FILE [--force]

Copies the SQLite store of DATABASE_URL to FILE while the service keeps running: one consistent
snapshot holding every write acknowledged before the backup began (plants, access tokens, webhook
subscriptions and their pending events, the schema version), taken with SQLite's online backup API.
The store is only read. The backup runs at a low CPU priority and pauses between its steps, so the
service keeps most of its rate. FILE is written next to its final name under a temporary one, flushed
to disk, and only then renamed: an interrupted backup or a full disk never leaves a partial FILE.
FILE is a whole store, one file; restore it with plantstore restore. Tokens given in PLANTSTORE_TOKENS
are configuration, not part of the store: keep them apart. For PostgreSQL use pg_dump (docs/guides/backups.md).

Options:
  --force        replace FILE if it exists (without it an existing FILE is refused and left untouched)
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const RESTORE_USAGE = `Usage: plantstore restore FILE [--force]

Makes the SQLite store of DATABASE_URL the store the backup FILE holds. FILE is checked first: a whole
SQLite file that passes PRAGMA quick_check, a plantstore store, of a schema version this release knows;
an older one is brought up to date. No process may have the store open: one that a running service
uses is refused (stop the service first). The restored store is prepared next to the store and takes
its name in one rename, after the old store's -wal and -shm files are removed: a failure leaves the
store as it was. A service started afterwards serves exactly the backed-up state.

Options:
  --force        replace a store that exists (without it an existing store is refused and left untouched)
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const EXPORT_USAGE = `Usage: plantstore export [--tag TAG] [--out FILE [--force]]

Writes every plant of the store of DATABASE_URL (any backend) as NDJSON: one JSON document per line, as
GET /plants/{id} shows it, ordered by id, read in pages in constant memory. On a terminal, stderr shows
the progress. GET /admin/export serves the same over HTTP.

Options:
  --tag TAG      only the plants with exactly this tag
  --out FILE     write to FILE (through a temporary name, renamed when complete) instead of stdout
  --force        replace FILE if it exists
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const IMPORT_USAGE = `Usage: plantstore import FILE|- [--on-conflict report|replace|fail] [--json]

Creates the plants of an NDJSON file (an export's lines; - reads stdin) in the store of DATABASE_URL,
through the store's batched writes. A line whose plant is stored already changes nothing, so importing
a file twice changes nothing the second time. Each created or replaced plant raises its webhook event,
as a POST or a PUT would. Every line that is not taken is reported on stderr with its line number.

Options:
  --on-conflict  what to do with a line whose id is stored with another name or tag:
                   report   leave the stored plant, report the line (the default)
                   replace  store the line's plant in its place
                   fail     stop at that line; the lines before it stay imported
  --json         print the counts as one JSON document
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const COPY_USAGE = `Usage: plantstore copy --from URL --to URL [--merge]

Copies a whole store into another, SQLite or PostgreSQL either way: plants (their exact ids), access
tokens (live, expired and revoked; their digests, never the tokens), webhook subscriptions (their
signing secrets as stored, still sealed under WEBHOOK_SECRETS_KEY: start the target's service with the
same key), pending webhook events (unleased, so the target delivers them at once) and delivery attempts.

The source is read in one snapshot and never changed. Stop its service first, or stop writing to it:
a write made while the copy runs is not in the copy. No service may use a SQLite target meanwhile.

A target that holds data (a plant, a token or a webhook subscription; the "initial-admin" token that a
service's first start made counts) is refused and left as it is, unless --merge is given. The copy is
committed in batches, each with a record of where it stands: interrupted (Ctrl-C, kill -9, the target
database stopping), the same command run again finishes it. On success, one line on stdout says what
was copied and how fast; on a terminal, stderr shows the progress. A URL's password may be left out
and given in PGPASSWORD; no message shows it.

Options:
  --from URL     the store to copy: sqlite:PATH (an existing file) or postgres://...
  --to URL       the store to copy into: sqlite:PATH (made if need be) or postgres://...
  --merge        copy into a target that holds data: rows it lacks are added, rows it holds as they are
                 are skipped, and rows it holds otherwise are kept as it has them and listed on stderr
                 (exit 1), as is a live token whose name a live token of the target has
  -h, --help     show this help

${EXIT_CODES}`
