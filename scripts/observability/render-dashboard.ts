/**
 * Draws the Grafana dashboard deploy/observability/grafana/dashboards/plantstore.json without Grafana: each
 * panel's own PromQL is run against a Prometheus over its HTTP API (query_range over the window), the
 * results are drawn as simple SVG charts and stat tiles laid out on the dashboard's grid, and headless
 * Chromium takes a screenshot of the page. For machines where Grafana cannot be installed; the queries,
 * legends, units, axes and layout are the dashboard's, the looks are not Grafana's.
 *
 *   npx tsx scripts/observability/render-dashboard.ts --prometheus http://127.0.0.1:9090 \
 *     --start 2026-11-24T10:00:00Z --end 2026-11-24T10:03:00Z --step 2 --rate-interval 10s \
 *     --out docs/images/dashboard.png [--html /tmp/dashboard.html]
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { chromium } from 'playwright-core'
import { findChromium, HEADLESS_CHROMIUM_ARGS } from '../chromium.js'

interface Target { refId: string, expr: string, legendFormat?: string }
interface Override { matcher: { id: string, options: string }, properties: Array<{ id: string, value: unknown }> }
interface Panel {
  id: number
  type: 'row' | 'timeseries' | 'stat'
  title: string
  gridPos: { h: number, w: number, x: number, y: number }
  targets?: Target[]
  fieldConfig?: {
    defaults?: {
      unit?: string
      decimals?: number
      mappings?: Array<{ type: string, options: Record<string, { text?: string, color?: string }> }>
      thresholds?: { steps: Array<{ color: string, value: number | null }> }
    }
    overrides?: Override[]
  }
}
interface Dashboard { title: string, panels: Panel[] }
interface Series { name: string, points: Array<[number, number]>, right: boolean }
interface MatrixResult { metric: Record<string, string>, values: Array<[number, string]> }

const { values: options } = parseArgs({
  options: {
    dashboard: { type: 'string', default: 'deploy/observability/grafana/dashboards/plantstore.json' },
    prometheus: { type: 'string', default: 'http://127.0.0.1:9090' },
    start: { type: 'string' },
    end: { type: 'string' },
    step: { type: 'string', default: '2' },
    'rate-interval': { type: 'string', default: '10s' },
    instance: { type: 'string', default: '.*' },
    width: { type: 'string', default: '1600' },
    out: { type: 'string', default: 'docs/images/dashboard.png' },
    html: { type: 'string' }
  }
})

const toSeconds = (time: string | undefined, fallback: number) => {
  if (time === undefined) return fallback
  return /^\d+(\.\d+)?$/.test(time) ? Number(time) : Date.parse(time) / 1000
}
const end = toSeconds(options.end, Date.now() / 1000)
const start = toSeconds(options.start, end - 180)
const step = Number(options.step)
const board = JSON.parse(readFileSync(options.dashboard, 'utf8')) as Dashboard

/** The dashboard's variables as Grafana would fill them in: all instances, the rate interval given. */
function withVariables (expr: string): string {
  return expr
    .replaceAll('$__rate_interval', options['rate-interval'])
    .replaceAll('$instance', options.instance)
}

async function queryRange (expr: string): Promise<MatrixResult[]> {
  const url = new URL('/api/v1/query_range', options.prometheus)
  url.search = new URLSearchParams({ query: withVariables(expr), start: String(start), end: String(end), step: String(step) }).toString()
  const response = await fetch(url)
  const body = await response.json() as { status: string, error?: string, data?: { result: MatrixResult[] } }
  if (body.status !== 'success') throw new Error(`${expr}: ${body.error ?? response.status}`)
  return body.data?.result ?? []
}

function legend (format: string | undefined, labels: Record<string, string>): string {
  if (format === undefined || format === '') return JSON.stringify(labels)
  return format.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_match, label: string) => labels[label] ?? '')
}

async function seriesOf (panel: Panel): Promise<Series[]> {
  const rightMatchers = (panel.fieldConfig?.overrides ?? [])
    .filter((override) => override.matcher.id === 'byRegexp' &&
      override.properties.some((property) => property.id === 'custom.axisPlacement' && property.value === 'right'))
    .map((override) => new RegExp(`^(?:${override.matcher.options})$`))
  const all: Series[] = []
  for (const target of panel.targets ?? []) {
    for (const result of await queryRange(target.expr)) {
      const name = legend(target.legendFormat, result.metric)
      const points = result.values
        .map(([time, value]): [number, number] => [time, Number(value)])
        .filter(([, value]) => Number.isFinite(value))
      all.push({ name, points, right: rightMatchers.some((pattern) => pattern.test(name)) })
    }
  }
  return all.sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }))
}

/** The unit of the right axis, from the override that moved a series there. */
function rightUnit (panel: Panel): string | undefined {
  for (const override of panel.fieldConfig?.overrides ?? []) {
    const unit = override.properties.find((property) => property.id === 'unit')
    if (unit !== undefined) return String(unit.value)
  }
  return undefined
}

// --- formatting, close to Grafana's units ----------------------------------------------------------------

function trimmed (value: number, decimals: number | undefined): string {
  const digits = decimals ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2)
  return value.toFixed(digits).replace(/\.0+$|(\.\d*?)0+$/, '$1')
}

function scaled (value: number, steps: Array<[number, string]>, decimals: number | undefined): string {
  for (const [factor, suffix] of steps) {
    if (Math.abs(value) >= factor) return `${trimmed(value / factor, decimals)} ${suffix}`.trim()
  }
  const [factor, suffix] = steps[steps.length - 1] as [number, string]
  return `${trimmed(value / factor, decimals)} ${suffix}`.trim()
}

function format (value: number, unit: string | undefined, decimals?: number): string {
  if (!Number.isFinite(value)) return '–'
  if (value === 0) return unit === 'percentunit' ? '0%' : '0'
  switch (unit) {
    case 's': return scaled(value, [[3600, 'h'], [60, 'min'], [1, 's'], [1e-3, 'ms'], [1e-6, 'µs'], [1e-9, 'ns']], decimals)
    case 'bytes': return scaled(value, [[2 ** 30, 'GiB'], [2 ** 20, 'MiB'], [2 ** 10, 'KiB'], [1, 'B']], decimals)
    case 'percentunit': return `${trimmed(value * 100, decimals)}%`
    case 'reqps': return `${scaled(value, [[1e6, 'M'], [1e3, 'K'], [1, '']], decimals).replace(' ', '')} req/s`
    case 'ops': return `${scaled(value, [[1e6, 'M'], [1e3, 'K'], [1, '']], decimals).replace(' ', '')} ops/s`
    default: return scaled(value, [[1e9, 'Bil'], [1e6, 'Mil'], [1e3, 'K'], [1, ''], [1e-3, 'm'], [1e-6, 'µ']], decimals)
  }
}

const PALETTE = ['#73BF69', '#F2CC0C', '#8AB8FF', '#FF780A', '#F2495C', '#5794F2', '#B877D9', '#705DA0', '#37872D',
  '#FADE2A', '#447EBC', '#C4162A', '#1F78C1', '#BA43A9', '#E0752D', '#6ED0E0', '#EF843C', '#E24D42', '#CCA300',
  '#0A437C', '#6D1F62', '#584477', '#96D98D', '#FFB357']
const COLOR_NAMES: Record<string, string> = { green: '#73BF69', red: '#F2495C', orange: '#FF9830', blue: '#5794F2', yellow: '#FADE2A' }
const escape = (text: string) => text.replace(/[&<>"]/g, (character) => `&#${character.charCodeAt(0)};`)

function niceTicks (low: number, high: number, count = 4): number[] {
  if (high <= low) high = low + 1
  const raw = (high - low) / count
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const stepSize = ([1, 2, 2.5, 5, 10].find((factor) => factor * magnitude >= raw) ?? 10) * magnitude
  const ticks: number[] = []
  // Up to the first tick at or above the highest value, so no line runs off the top.
  for (let tick = Math.floor(low / stepSize) * stepSize; ; tick += stepSize) {
    ticks.push(tick)
    if (tick >= high - stepSize * 1e-9) return ticks
  }
}

const clock = (time: number, seconds = false) => new Date(time * 1000).toISOString().slice(11, seconds ? 19 : 16)

// --- drawing -----------------------------------------------------------------------------------------------

function chart (panel: Panel, series: Series[], width: number, height: number): string {
  const unit = panel.fieldConfig?.defaults?.unit
  const unitRight = rightUnit(panel)
  const hasRight = series.some((one) => one.right && one.points.length > 0)
  const margin = { left: 64, right: hasRight ? 64 : 14, top: 8, bottom: 20 }
  const plotWidth = width - margin.left - margin.right
  const plotHeight = height - margin.top - margin.bottom
  const axis = (right: boolean) => {
    const values = series.filter((one) => one.right === right).flatMap((one) => one.points.map(([, value]) => value))
    const high = Math.max(0, ...values)
    const ticks = niceTicks(0, high === 0 ? 1 : high)
    return { ticks, top: ticks[ticks.length - 1] as number }
  }
  const left = axis(false)
  const right = axis(true)
  const x = (time: number) => margin.left + ((time - start) / (end - start)) * plotWidth
  const y = (value: number, top: number) => margin.top + plotHeight - (value / top) * plotHeight
  const parts: string[] = []
  for (const tick of left.ticks) {
    parts.push(`<line x1="${margin.left}" x2="${margin.left + plotWidth}" y1="${y(tick, left.top)}" y2="${y(tick, left.top)}" class="grid"/>`,
      `<text x="${margin.left - 6}" y="${y(tick, left.top) + 4}" text-anchor="end">${escape(format(tick, unit))}</text>`)
  }
  if (hasRight) {
    for (const tick of right.ticks) {
      parts.push(`<text x="${margin.left + plotWidth + 6}" y="${y(tick, right.top) + 4}">${escape(format(tick, unitRight ?? unit))}</text>`)
    }
  }
  const spacing = [15, 30, 60, 120, 300, 600, 1800, 3600].find((seconds) => (end - start) / seconds <= 7) ?? 7200
  for (let time = Math.ceil(start / spacing) * spacing; time <= end; time += spacing) {
    parts.push(`<text x="${x(time)}" y="${height - 4}" text-anchor="middle">${clock(time, spacing < 60)}</text>`)
  }
  series.forEach((one, index) => {
    const color = PALETTE[index % PALETTE.length] as string
    const top = one.right ? right.top : left.top
    // A gap in the data (more than two steps) breaks the line, as Grafana does.
    let path = ''
    let previous: number | undefined
    for (const [time, value] of one.points) {
      path += `${previous === undefined || time - previous > step * 2.5 ? 'M' : 'L'}${x(time).toFixed(1)},${y(value, top).toFixed(1)}`
      previous = time
    }
    if (path !== '') parts.push(`<path d="${path}" stroke="${color}" fill="none" stroke-width="1.4"${one.right ? ' stroke-dasharray="4 2"' : ''}/>`)
  })
  return `<svg width="${width}" height="${height}">${parts.join('')}</svg>`
}

function legendTable (panel: Panel, series: Series[]): string {
  const unit = panel.fieldConfig?.defaults?.unit
  const unitRight = rightUnit(panel) ?? unit
  const rows = series.map((one, index) => {
    const values = one.points.map(([, value]) => value)
    const mean = values.reduce((sum, value) => sum + value, 0) / values.length
    const shown = one.right ? unitRight : unit
    return `<tr><td><span class="swatch" style="background:${PALETTE[index % PALETTE.length]}"></span>${escape(one.name)}${one.right ? ' <i>(right)</i>' : ''}</td>` +
      `<td>${escape(format(mean, shown))}</td><td>${escape(format(Math.max(...values), shown))}</td><td>${escape(format(values[values.length - 1] ?? NaN, shown))}</td></tr>`
  })
  return `<table class="legend"><tr><th></th><th>Mean</th><th>Max</th><th>Last</th></tr>${rows.join('')}</table>`
}

function statTile (panel: Panel, series: Series[]): string {
  const defaults = panel.fieldConfig?.defaults
  const last = series[0]?.points[series[0].points.length - 1]?.[1]
  if (last === undefined) return '<div class="stat" style="background:#22252b">No data</div>'
  let text = format(last, defaults?.unit, defaults?.decimals)
  let color: string | undefined
  for (const mapping of defaults?.mappings ?? []) {
    const mapped = mapping.options[String(last)]
    if (mapped !== undefined) {
      text = mapped.text ?? text
      color = mapped.color
    }
  }
  if (color === undefined) {
    for (const { color: stepColor, value } of defaults?.thresholds?.steps ?? []) if (value === null || last >= value) color = stepColor
  }
  return `<div class="stat" style="background:${COLOR_NAMES[color ?? 'blue'] ?? color}">${escape(text)}</div>`
}

const width = Number(options.width)
const column = width / 24
const rowUnit = 30
const headerHeight = 64
const cells: string[] = []
let bottom = 0
for (const panel of board.panels) {
  const { x, y, w, h } = panel.gridPos
  const left = x * column + 4
  const top = headerHeight + y * rowUnit + 4
  const boxWidth = w * column - 8
  const boxHeight = h * rowUnit - 8
  bottom = Math.max(bottom, top + boxHeight)
  if (panel.type === 'row') {
    cells.push(`<div class="row" style="left:${left}px;top:${top}px;width:${boxWidth}px">${escape(panel.title)}</div>`)
    continue
  }
  const series = await seriesOf(panel)
  const nonEmpty = series.filter((one) => one.points.length > 0)
  let body: string
  if (panel.type === 'stat') body = statTile(panel, nonEmpty)
  else if (nonEmpty.length === 0) body = '<div class="nodata">No data</div>'
  else {
    const chartHeight = Math.max(90, Math.round(boxHeight * 0.62) - 28)
    body = chart(panel, nonEmpty, Math.round(boxWidth - 8), chartHeight) +
      `<div class="legendbox" style="max-height:${boxHeight - chartHeight - 36}px">${legendTable(panel, nonEmpty)}</div>`
  }
  cells.push(`<div class="panel" style="left:${left}px;top:${top}px;width:${boxWidth}px;height:${boxHeight}px">` +
    `<div class="title">${escape(panel.title)}</div>${body}</div>`)
}

const window = `${new Date(start * 1000).toISOString().slice(0, 16).replace('T', ' ')} – ${clock(end)} UTC`
const html = `<!doctype html><html><head><meta charset="utf-8"><title>${escape(board.title)}</title><style>
body { margin: 0; background: #111217; color: #ccccdc; font: 12px Inter, "Helvetica Neue", Arial, sans-serif; }
.header { position: absolute; left: 0; top: 0; width: ${width}px; height: ${headerHeight - 8}px; display: flex; align-items: center; gap: 24px; padding: 0 12px; box-sizing: border-box; border-bottom: 1px solid #2c3235; }
.header h1 { font-size: 18px; font-weight: 500; margin: 0; color: #d8d9da; }
.header .var { background: #181b1f; border: 1px solid #2c3235; padding: 4px 8px; border-radius: 2px; }
.header .note { margin-left: auto; color: #8e8e9a; font-size: 11px; }
.panel { position: absolute; background: #181b1f; border: 1px solid #2c3235; border-radius: 2px; box-sizing: border-box; padding: 4px; overflow: hidden; }
.title { font-size: 13px; font-weight: 500; color: #d8d9da; padding: 2px 4px 6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.row { position: absolute; font-size: 15px; font-weight: 500; color: #d8d9da; padding-top: 4px; }
.stat { position: absolute; inset: 28px 4px 4px 4px; display: flex; align-items: center; justify-content: center; font-size: 30px; font-weight: 500; color: #fff; border-radius: 2px; }
.nodata { display: flex; align-items: center; justify-content: center; height: 70%; color: #8e8e9a; font-size: 14px; }
svg text { fill: #9fa0a8; font-size: 10px; }
svg .grid { stroke: #2c3235; stroke-width: 1; }
.legendbox { overflow: hidden; margin-top: 4px; }
.legend { border-collapse: collapse; width: 100%; font-size: 10.5px; }
.legend th { text-align: right; color: #5794F2; font-weight: 500; padding: 0 6px; }
.legend td { padding: 0 6px; white-space: nowrap; text-align: right; }
.legend td:first-child { text-align: left; max-width: 330px; overflow: hidden; text-overflow: ellipsis; }
.legend i { color: #8e8e9a; }
.swatch { display: inline-block; width: 12px; height: 3px; margin-right: 6px; vertical-align: middle; }
</style></head><body>
<div class="header"><h1>${escape(board.title)}</h1><span class="var">Data source: Prometheus</span><span class="var">Instance: All</span>
<span class="var">${escape(window)}</span>
<span class="note">The dashboard's own queries run against Prometheus and drawn by scripts/observability/render-dashboard.ts; not a Grafana screenshot</span></div>
${cells.join('\n')}
</body></html>`

if (options.html !== undefined) writeFileSync(options.html, html)
const { executablePath } = await findChromium()
const browser = await chromium.launch({ executablePath, args: HEADLESS_CHROMIUM_ARGS })
try {
  const page = await browser.newPage({ viewport: { width, height: Math.ceil(bottom + 8) }, deviceScaleFactor: 1 })
  await page.setContent(html, { waitUntil: 'load' })
  await page.screenshot({ path: options.out, fullPage: true })
} finally {
  await browser.close()
}
console.log(`wrote ${options.out} (${board.panels.length} panels, ${window})`)
