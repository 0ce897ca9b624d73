/** One HTTP message as a ```http block of a page shows it: its first line, its headers, its body. */
export interface HttpMessage {
  /** The 1-based line of the page where the block's fence opens. */
  readonly line: number
  readonly startLine: string
  /** In the order shown, names as written. */
  readonly headers: ReadonlyArray<readonly [name: string, value: string]>
  /** The text after the blank line; empty when there is none. */
  readonly body: string
}

export interface HttpExample {
  readonly request: HttpMessage
  readonly response: HttpMessage
}

const FENCE = /^```(\S*)\s*$/
const STATUS_LINE = /^HTTP\/1\.1 \d{3}\b/

/**
 * Every request/response pair of a Markdown page, in page order: each ```http block that starts with a
 * request line, followed by the next ```http block, which starts with a status line. Other fenced
 * blocks (```text, ```sh, …) are prose. A request without its response, or a response without its
 * request, is an error: the page would show an example nobody runs.
 */
export function httpExamplesOf (page: string, markdown: string): HttpExample[] {
  const examples: HttpExample[] = []
  let pending: HttpMessage | undefined
  for (const block of fencedBlocks(markdown)) {
    if (block.language !== 'http') continue
    const message = messageOf(page, block.line, block.lines)
    const isResponse = STATUS_LINE.test(message.startLine)
    if (isResponse && pending === undefined) throw new Error(`${page}:${message.line}: a response without a request before it`)
    if (!isResponse && pending !== undefined) throw new Error(`${page}:${pending.line}: a request without a response after it`)
    if (isResponse) {
      examples.push({ request: pending as HttpMessage, response: message })
      pending = undefined
    } else {
      pending = message
    }
  }
  if (pending !== undefined) throw new Error(`${page}:${pending.line}: a request without a response after it`)
  return examples
}

function * fencedBlocks (markdown: string): Generator<{ line: number, language: string, lines: string[] }> {
  const lines = markdown.split('\n')
  for (let index = 0; index < lines.length; index++) {
    const language = FENCE.exec(lines[index] as string)?.[1]
    if (language === undefined) continue
    const start = index
    const content: string[] = []
    for (index++; index < lines.length && lines[index] !== '```'; index++) content.push(lines[index] as string)
    yield { line: start + 1, language, lines: content }
  }
}

function messageOf (page: string, line: number, lines: readonly string[]): HttpMessage {
  const [startLine = '', ...rest] = lines
  const blank = rest.indexOf('')
  const headerLines = blank === -1 ? rest : rest.slice(0, blank)
  const headers = headerLines.map((text) => {
    const colon = text.indexOf(':')
    if (colon <= 0) throw new Error(`${page}:${line}: "${text}" is not a header line (name: value)`)
    return [text.slice(0, colon).trim(), text.slice(colon + 1).trim()] as const
  })
  return { line, startLine, headers, body: blank === -1 ? '' : rest.slice(blank + 1).join('\n').trim() }
}
