import type { Config } from '../config.js'
import { parseOptions, type HelpInvocation, type Options, type ParsedOptions } from './options.js'

/** What the command line asks for, checked: nothing has touched the configuration or the store yet. */
export interface Invocation { readonly command: string }

/** Commands whose names begin with the same word, `plantstore <group> --help` showing them. */
export interface CommandGroup {
  readonly name: string
  readonly usage: string
}

/** A row of the table of commands (commands.ts), which the `plantstore` entry point reads. */
export interface Command {
  /** The words after `plantstore`: `backup`, `tokens create`. */
  readonly name: string
  /** The group whose word comes first in the name, for a command of a group. */
  readonly group?: CommandGroup
  /** The name and its operands as `plantstore --help` lists them: `backup FILE`. */
  readonly synopsis: string
  /** What it does, in the few words `plantstore --help` gives it. */
  readonly summary: string
  /** Its own help, `plantstore <name> --help`. */
  readonly usage: string
  /** Reads the arguments after its name; throws UsageError. `now` dates the options relative to it. */
  parse (args: readonly string[], now: number): Invocation | HelpInvocation
  /** Runs what `parse` returned, printing its own output, and resolves with the exit code (0 or 1). */
  run (invocation: Invocation, config: Config): Promise<number>
}

/** The arguments after a command's name, and the parser that reads them for that command and its help. */
export interface CommandArguments {
  /** When the command line was read: options relative to the present (`--expires-in`) count from it. */
  readonly now: number
  /** `parseOptions` of these arguments: `--help` gives the command's usage; errors point at it. */
  options (options: Options, allowPositionals: boolean): HelpInvocation | ParsedOptions
}

/** A command whose parser and action agree on its invocation's type. */
export interface CommandSpec<I extends Invocation> {
  readonly name: I['command']
  readonly group?: CommandGroup
  /** For a command with operands: how `plantstore --help` lists it (the name alone otherwise). */
  readonly synopsis?: string
  readonly summary: string
  readonly usage: string
  parse (args: CommandArguments): I | HelpInvocation
  run (invocation: I, config: Config): Promise<number>
}

export function defineCommand<I extends Invocation> (spec: CommandSpec<I>): Command {
  const { name, usage } = spec
  return {
    ...spec,
    synopsis: spec.synopsis ?? name,
    parse: (args, now) => spec.parse({ now, options: (options, allowPositionals) => parseOptions(args, name, usage, options, allowPositionals) }),
    // The entry point runs a command only with what the same command's `parse` returned.
    run: (invocation, config) => spec.run(invocation as I, config)
  }
}

export function isHelpInvocation (invocation: Invocation | HelpInvocation): invocation is HelpInvocation {
  return invocation.command === 'help' && 'text' in invocation
}
