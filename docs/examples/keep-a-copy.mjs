#!/usr/bin/env node
/**
 * Keeps a copy of a plantstore in a file, in sync: the example of docs/guides/keep-a-copy.md. Node.js 20
 * or later, nothing to install.
 *
 *   PLANTSTORE_URL    the service (default http://127.0.0.1:3000)
 *   PLANTSTORE_TOKEN  a token with the scope plants:read
 *   COPY_FILE         the copy (default plants-copy.ndjson), written as GET /admin/export writes the store:
 *                     one plant per line, by id. The seq it is at goes beside it, in COPY_FILE.seq.
 *
 * It reads the head, then every plant, then follows the change feed for ever, polling its Link. Stop it
 * at any time, even with kill -9: it saves after each page, and goes on from the saved seq. A restart of
 * the service only makes it wait. Past the retention (410) it reads the plants again.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs'

const BASE = process.env.PLANTSTORE_URL ?? 'http://127.0.0.1:3000'
const TOKEN = process.env.PLANTSTORE_TOKEN ?? ''
const FILE = process.env.COPY_FILE ?? 'plants-copy.ndjson'
const PAGE = 1000
const POLL_MS = 1000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Ids and seq are 64-bit integers: JSON.parse would round those above 2^53, so their digits are kept as
 * strings. (`"id":` with an unescaped quote before the colon cannot occur inside a JSON string.)
 */
const parse = (text) => JSON.parse(text.replace(/"(id|seq)":(-?\d+)/g, '"$1":"$2"'))

/** GETs a path: its status, the Link header's next path, and the body. Waits out a service that is down or busy. */
async function get (path) {
  for (;;) {
    let response
    try {
      response = await fetch(new URL(path, BASE), { headers: { authorization: `Bearer ${TOKEN}` } })
    } catch {
      await sleep(POLL_MS) // The service is not reachable (restarting?): try again.
      continue
    }
    const text = await response.text()
    if (response.status === 200 || response.status === 410) {
      const next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
      return { status: response.status, next, body: parse(text) }
    }
    if (response.status !== 429 && response.status < 500) throw new Error(`GET ${path}: ${response.status} ${text}`)
    await sleep(POLL_MS)
  }
}

/** The store as it is now: the head first, then every plant (changes made meanwhile come again after the head). */
async function readEverything () {
  const { body: head } = await get('/plants/changes/head')
  const plants = new Map()
  for (let next = `/plants?limit=${PAGE}`; next !== undefined;) {
    const page = await get(next)
    for (const plant of page.body) plants.set(plant.id, plant)
    next = page.next
  }
  return { seq: head.seq, plants }
}

function load () {
  try {
    const seq = readFileSync(`${FILE}.seq`, 'utf8').trim()
    const plants = new Map()
    for (const line of readFileSync(FILE, 'utf8').split('\n')) {
      if (line === '') continue
      const plant = parse(line)
      plants.set(plant.id, plant)
    }
    return { seq, plants }
  } catch (error) {
    if (error.code === 'ENOENT') return undefined
    throw error
  }
}

const byId = (a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0)
const line = ({ id, name, tag }) => `{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}\n`

/**
 * Writes the copy, then its seq, each whole or not at all (a rename). Stopped in between, the copy is
 * ahead of its seq: the changes in between come again, and applying a change twice is harmless.
 */
function save ({ seq, plants }) {
  writeFileSync(`${FILE}.tmp`, [...plants.keys()].sort(byId).map((id) => line(plants.get(id))).join(''))
  renameSync(`${FILE}.tmp`, FILE)
  writeFileSync(`${FILE}.seq.tmp`, `${seq}\n`)
  renameSync(`${FILE}.seq.tmp`, `${FILE}.seq`)
}

async function main () {
  let copy = load()
  if (copy === undefined) {
    copy = await readEverything()
    save(copy)
  }
  let next = `/plants/changes?after=${copy.seq}&limit=${PAGE}`
  for (;;) {
    const page = await get(next)
    if (page.status === 410) {
      // Changes this copy has not seen are no longer kept: read everything again.
      copy = await readEverything()
      save(copy)
      next = `/plants/changes?after=${copy.seq}&limit=${PAGE}`
      continue
    }
    for (const change of page.body) {
      if (change.type === 'plant.deleted') copy.plants.delete(change.id)
      else copy.plants.set(change.id, change.plant)
      copy.seq = change.seq
    }
    if (page.body.length > 0) save(copy)
    next = page.next
    if (page.body.length < PAGE) await sleep(POLL_MS) // Caught up: poll.
  }
}

main().catch((error) => {
  console.error(error.message)
  process.exit(1)
})
