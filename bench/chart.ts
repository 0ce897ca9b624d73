interface ChartRow { target: string, load: string, rps: number, ratio: number, p99: number, serverCpuUs: number }

const COLOURS: Record<string, string> = { baseline: '#9aa5b1', 'baseline-logged': '#cbd2d9', sqlite: '#2f7ed8', postgres: '#336791', memory: '#5fa55a' }
const LOAD_TITLES: Record<string, string> = { post: 'POST /plants', get: 'GET /plants/{id}', list: 'GET /plants (page of 100)' }

/**
 * A grouped bar chart of requests per second, one group per load, each bar labelled with its ratio to
 * the baseline above it and the server's CPU µs per request inside it.
 */
export function renderChart (rows: readonly ChartRow[], machine: { date: string, cpus: string, node: string, pinned: string, loadGenerator: string }): string {
  const loads = [...new Set(rows.map((row) => row.load))]
  const targets = [...new Set(rows.map((row) => row.target))]
  const width = 900
  const height = 420
  const top = 60
  const bottom = 330
  const left = 70
  const groupWidth = (width - left - 20) / loads.length
  const barWidth = (groupWidth - 40) / targets.length
  const maximum = Math.max(...rows.map((row) => row.rps)) * 1.15
  const y = (value: number) => bottom - (value / maximum) * (bottom - top)
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')

  const bars = loads.flatMap((load, loadIndex) => targets.map((target, targetIndex) => {
    const row = rows.find((candidate) => candidate.load === load && candidate.target === target)
    if (row === undefined) return ''
    const x = left + loadIndex * groupWidth + 20 + targetIndex * barWidth
    return `<rect x="${x.toFixed(1)}" y="${y(row.rps).toFixed(1)}" width="${(barWidth - 4).toFixed(1)}" height="${(bottom - y(row.rps)).toFixed(1)}" fill="${COLOURS[target] ?? '#888'}"/>` +
      `<text x="${(x + barWidth / 2 - 2).toFixed(1)}" y="${(y(row.rps) - 6).toFixed(1)}" font-size="11" text-anchor="middle">${target === 'baseline' ? Math.round(row.rps) : `${row.ratio.toFixed(2)}×`}</text>` +
      `<text x="${(x + barWidth / 2 - 2).toFixed(1)}" y="${(bottom - 6).toFixed(1)}" font-size="10" fill="white" text-anchor="middle">${Math.round(row.serverCpuUs)} µs</text>`
  }))
  const groupLabels = loads.map((load, loadIndex) =>
    `<text x="${(left + loadIndex * groupWidth + groupWidth / 2).toFixed(1)}" y="${bottom + 22}" font-size="13" text-anchor="middle">${escape(LOAD_TITLES[load] ?? load)}</text>`)
  const ticks = Array.from({ length: 5 }, (_, index) => (maximum / 5) * index).map((value) =>
    `<line x1="${left}" x2="${width - 20}" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}" stroke="#e4e7eb"/>` +
    `<text x="${left - 8}" y="${(y(value) + 4).toFixed(1)}" font-size="11" text-anchor="end">${Math.round(value / 1000)}k</text>`)
  const legend = targets.map((target, index) =>
    `<rect x="${left + index * 150}" y="${bottom + 45}" width="12" height="12" fill="${COLOURS[target] ?? '#888'}"/>` +
    `<text x="${left + index * 150 + 18}" y="${bottom + 56}" font-size="12">${escape(target)}</text>`)

  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" viewBox="0 0 ${width} ${height}">
<rect width="100%" height="100%" fill="white"/>
<text x="${left}" y="24" font-size="16" font-weight="bold">plantstore: req/s (median), ratio to the bare-Fastify baseline, server CPU µs per request</text>
<text x="${left}" y="44" font-size="11" fill="#52606d">${escape(`${machine.date.slice(0, 16).replace('T', ' ')} UTC · ${machine.cpus} · Node ${machine.node} · ${machine.loadGenerator} · ${machine.pinned}`)}</text>
${ticks.join('\n')}
${bars.join('\n')}
${groupLabels.join('\n')}
${legend.join('\n')}
<text x="${left - 50}" y="${top - 8}" font-size="11">req/s</text>
</svg>
`
}
