/** How often the line is redrawn. */
const INTERVAL_MS = 250

/**
 * A progress line on a terminal's stderr, redrawn in place at most four times a second: how many plants,
 * how fast, and, when the share done is known, how long is left. Nothing is drawn when stderr is not a
 * terminal, so logs and pipes stay clean.
 */
export class ProgressLine {
  private readonly startedAt = Date.now()
  private drawnAt = 0
  private drawn = false

  constructor (private readonly verb: string, private readonly stream: NodeJS.WriteStream = process.stderr) {}

  /** How many plants so far; `doneShare` (0 to 1), when known, gives the time left. */
  update (plants: number, doneShare?: number): void {
    this.show(() => {
      const seconds = (Date.now() - this.startedAt) / 1000
      const rate = seconds > 0 ? Math.round(plants / seconds) : 0
      const left = doneShare !== undefined && doneShare > 0 && doneShare < 1
        ? `, about ${formatDuration(seconds * (1 - doneShare) / doneShare)} left`
        : ''
      return `${this.verb} ${plants.toLocaleString('en-US')} plants, ${rate.toLocaleString('en-US')}/s${left}`
    })
  }

  /** Draws the line `text` makes, unless the last was drawn less than INTERVAL_MS ago. */
  show (text: () => string): void {
    if (this.stream.isTTY !== true) return
    const now = Date.now()
    if (now - this.drawnAt < INTERVAL_MS) return
    this.drawnAt = now
    this.stream.write(`\r\x1b[2K${text()}`)
    this.drawn = true
  }

  /** Clears the line, so what is written next starts on a clean one. */
  finish (): void {
    if (this.drawn) this.stream.write('\r\x1b[2K')
    this.drawn = false
  }
}

function formatDuration (seconds: number): string {
  if (seconds < 60) return `${Math.ceil(seconds)} s`
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.ceil(seconds % 60)} s`
  return `${Math.floor(seconds / 3600)} h ${Math.ceil((seconds % 3600) / 60)} min`
}
