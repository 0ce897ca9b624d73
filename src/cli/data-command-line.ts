import { TAG_RULE } from '../schemas/plants.js'
import { plantTextViolation } from '../schemas/kinds.js'
import { isPostgresUrl } from '../store/open-store.js'
import { CONFLICT_POLICIES, type ConflictPolicy } from '../transfer/import.js'
import { JSON_OPTION, parseOptions, type HelpInvocation } from './options.js'
import { BACKUP_USAGE, COPY_USAGE, EXPORT_USAGE, IMPORT_USAGE, RESTORE_USAGE } from './data-usage.js'

/** A command that moves a store's data: its backups, exports, imports and copies, checked. */
export type DataInvocation =
  | { readonly command: 'backup', readonly file: string, readonly force: boolean }
  | { readonly command: 'restore', readonly file: string, readonly force: boolean }
  | {
    readonly command: 'export'
    readonly tag?: string
    /** The file to write; standard output when absent. */
    readonly out?: string
    readonly force: boolean
  }
  | {
    readonly command: 'import'
    /** The NDJSON file to read, or `-` for standard input. */
    readonly file: string
    readonly onConflict: ConflictPolicy
    readonly json: boolean
  }
  | { readonly command: 'copy', readonly from: string, readonly to: string, readonly merge: boolean }

export type DataCommand = DataInvocation['command']
export const DATA_COMMANDS: readonly DataCommand[] = ['backup', 'restore', 'export', 'import', 'copy']

const FORCE = { force: { type: 'boolean' } } as const

export function isDataCommand (command: string): command is DataCommand {
  return (DATA_COMMANDS as readonly string[]).includes(command)
}

/** Reads the arguments after `plantstore <command>`; throws UsageError. */
export function parseDataCommand (command: DataCommand, args: readonly string[]): DataInvocation | HelpInvocation {
  switch (command) {
    case 'backup': return parseFileCommand('backup', args, BACKUP_USAGE, 'the file to write the backup to')
    case 'restore': return parseFileCommand('restore', args, RESTORE_USAGE, 'the backup file to restore')
    case 'export': return parseExport(args)
    case 'import': return parseImport(args)
    case 'copy': return parseCopy(args)
  }
}

function parseFileCommand (command: 'backup' | 'restore', args: readonly string[], usage: string, what: string): DataInvocation | HelpInvocation {
  const parsed = parseOptions(args, command, usage, FORCE, true)
  if (parsed.command === 'help') return parsed
  const [file, ...more] = parsed.positionals
  if (file === undefined || file === '') throw parsed.fail(`${command} needs FILE, ${what}`)
  if (more.length > 0) throw parsed.fail(`${command} takes one FILE, got ${parsed.positionals.length}`)
  return { command, file, force: parsed.values.force === true }
}

function parseExport (args: readonly string[]): DataInvocation | HelpInvocation {
  const parsed = parseOptions(args, 'export', EXPORT_USAGE, { tag: { type: 'string' }, out: { type: 'string' }, ...FORCE }, false)
  if (parsed.command === 'help') return parsed
  const { fail, text } = parsed
  const tag = text('tag')
  const out = text('out')
  const force = parsed.values.force === true
  if (tag !== undefined) {
    const violation = plantTextViolation(tag, TAG_RULE)
    if (violation !== undefined) throw fail(`--tag ${violation}`)
  }
  if (out === '') throw fail('--out needs a file name')
  if (force && out === undefined) throw fail('--force is for --out FILE: it lets the export replace that file')
  return { command: 'export', ...(tag === undefined ? {} : { tag }), ...(out === undefined ? {} : { out }), force }
}

function parseImport (args: readonly string[]): DataInvocation | HelpInvocation {
  const parsed = parseOptions(args, 'import', IMPORT_USAGE, { 'on-conflict': { type: 'string' }, ...JSON_OPTION }, true)
  if (parsed.command === 'help') return parsed
  const { fail, text } = parsed
  const [file, ...more] = parsed.positionals
  if (file === undefined || file === '') throw fail('import needs FILE, an NDJSON file of plants, or - for standard input')
  if (more.length > 0) throw fail(`import takes one FILE, got ${parsed.positionals.length}`)
  const onConflict = text('on-conflict') ?? 'report'
  if (!(CONFLICT_POLICIES as readonly string[]).includes(onConflict)) {
    throw fail(`--on-conflict must be one of ${CONFLICT_POLICIES.join(', ')}, got ${JSON.stringify(onConflict)}`)
  }
  return { command: 'import', file, onConflict: onConflict as ConflictPolicy, json: parsed.values.json === true }
}

function parseCopy (args: readonly string[]): DataInvocation | HelpInvocation {
  const parsed = parseOptions(args, 'copy', COPY_USAGE, { from: { type: 'string' }, to: { type: 'string' }, merge: { type: 'boolean' } }, false)
  if (parsed.command === 'help') return parsed
  const { fail, text } = parsed
  const from = text('from')
  const to = text('to')
  if (from === undefined) throw fail('copy needs --from URL, the store to copy')
  if (to === undefined) throw fail('copy needs --to URL, the store to copy into')
  for (const [option, url] of [['--from', from], ['--to', to]] as const) {
    if (url === 'memory:') throw fail(`${option} is "memory:": a memory store lives only inside its service; copy a sqlite: or postgres:// store`)
    if (!url.startsWith('sqlite:') && !isPostgresUrl(url)) {
      throw fail(`${option} must be a sqlite: or postgres:// URL, got one starting ${JSON.stringify(url.split(':')[0])}`)
    }
  }
  if (from === to) throw fail('--from and --to name the same store')
  return { command: 'copy', from, to, merge: parsed.values.merge === true }
}
