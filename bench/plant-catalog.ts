import { foldName } from '../src/store/plant-names.js'

/**
 * The plants of the query part (`--only query`) and of the baseline that part measures against, the
 * same on every side: plant `id` (1 to N) is named like a botanical name, `Genus species`, a quarter of
 * them with a cultivar, `Genus species 'Cultivar'` (about 26 characters), the words made of syllables
 * (some with non-ASCII letters: `é`, `ö`, `ß`, `ñ`, Cyrillic) from a seeded generator, and picked for each id by a
 * hash of it. So any 3 to 8 characters of a word match tens to thousands of plants: a genus is shared
 * by about N ÷ 500 plants, a species by about N ÷ 20,000, a cultivar by about N ÷ 1,200. Plant `id`
 * has the tag `tag-<id mod 100>`: 10,000 plants a tag at a million.
 */

export const GENERA = 500
export const SPECIES = 20_000
export const CULTIVARS = 300
export const TAGS = 100

/** A deterministic generator of 32-bit numbers (mulberry32). */
export function seeded (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6D2B79F5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }
}

/** A 32-bit hash of an integer and a salt (murmur3's finalizer): each plant's words, independent of the others'. */
function hash (value: number, salt: number): number {
  let h = (Math.imul(value, 0x9E3779B1) ^ salt) >>> 0
  h = Math.imul(h ^ (h >>> 16), 0x85EBCA6B)
  h = Math.imul(h ^ (h >>> 13), 0xC2B2AE35)
  return (h ^ (h >>> 16)) >>> 0
}

const ONSETS = ['b', 'c', 'd', 'f', 'g', 'h', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z', 'ph', 'th', 'ch', 'st', 'br', 'cr', 'tr', 'gl', 'pl', 'sp', 'dr', 'fl']
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'ae', 'ia', 'io', 'y', 'ei', 'ou']
const ACCENTED_VOWELS = ['é', 'è', 'ö', 'ü', 'å', 'ø', 'ï']
const ACCENTED_ONSETS = ['ñ', 'ç']
const CODAS = ['', '', '', 'n', 'r', 's', 'l', 'x', 'm', 'nd', 'rt']
const GENUS_ENDINGS = ['a', 'ia', 'us', 'um', 'is', 'on', 'ella', 'anthus', 'opsis', 'ium', 'era', 'ina']
const SPECIES_ENDINGS = ['a', 'us', 'um', 'ii', 'ensis', 'ata', 'oides', 'ifolia', 'icum', 'ora', 'alis', 'ina', 'osa']
const CYRILLIC = ['Дом', 'Берёза', 'Роза', 'Лес', 'Сад', 'Мята', 'Зима', 'Вишня', 'Ирис', 'Липа']

/** Distinct words of `count`, each made by `word`. */
function vocabulary (count: number, word: () => string): string[] {
  const words = new Set<string>()
  while (words.size < count) words.add(word())
  return [...words]
}

const random = seeded(35)
const pick = <T>(items: readonly T[]) => items[random() % items.length] as T
/** One syllable; one in twelve with an accented vowel, one in forty with `ñ` or `ç`, one in sixty ending in `ß`. */
function syllable (): string {
  const onset = random() % 40 === 0 ? pick(ACCENTED_ONSETS) : pick(ONSETS)
  const vowel = random() % 12 === 0 ? pick(ACCENTED_VOWELS) : pick(VOWELS)
  return `${onset}${vowel}${random() % 60 === 0 ? 'ß' : pick(CODAS)}`
}
const syllables = (least: number, most: number) => Array.from({ length: least + random() % (most - least + 1) }, syllable).join('')
const capitalized = (word: string) => `${word.charAt(0).toUpperCase()}${word.slice(1)}`

const genera = vocabulary(GENERA, () => capitalized(`${syllables(1, 3)}${pick(GENUS_ENDINGS)}`))
const species = vocabulary(SPECIES, () => `${syllables(1, 3)}${pick(SPECIES_ENDINGS)}`)
const cultivars = vocabulary(CULTIVARS, () => random() % 10 === 0 ? `${pick(CYRILLIC)} ${capitalized(syllables(1, 2))}` : capitalized(syllables(2, 3)))

/** The words of plant `id`: indexes into the genera, species and cultivars (-1: none). */
export function wordsOf (id: number): { genus: number, species: number, cultivar: number } {
  return {
    genus: hash(id, 1) % GENERA,
    species: hash(id, 2) % SPECIES,
    cultivar: hash(id, 3) % 4 === 0 ? hash(id, 4) % CULTIVARS : -1
  }
}

export function nameOf (id: number): string {
  const words = wordsOf(id)
  const name = `${genera[words.genus] as string} ${species[words.species] as string}`
  return words.cultivar < 0 ? name : `${name} '${cultivars[words.cultivar] as string}'`
}

export const tagOf = (id: number) => `tag-${id % TAGS}`

/** The folded words of the vocabularies, as the stored folded names hold them: a term within one of them matches where it stands. */
export const foldedWords = {
  genera: genera.map(foldName),
  species: species.map(foldName),
  cultivars: cultivars.map(foldName)
}

/** Plants 1 to `size` by word (CSR lists): how many plants a search term matches, exactly, without reading a million names. */
export class CatalogIndex {
  readonly #marks: Uint32Array
  #generation = 0
  readonly #lists: ReadonlyArray<{ readonly words: readonly string[], readonly offsets: Uint32Array, readonly ids: Uint32Array }>

  constructor (readonly size: number) {
    this.#marks = new Uint32Array(size + 1)
    const genus = new Uint32Array(size + 1)
    const speciesOf = new Uint32Array(size + 1)
    const cultivar = new Int32Array(size + 1)
    for (let id = 1; id <= size; id++) {
      const words = wordsOf(id)
      genus[id] = words.genus
      speciesOf[id] = words.species
      cultivar[id] = words.cultivar
    }
    const listOf = (words: readonly string[], wordOf: (id: number) => number) => {
      const offsets = new Uint32Array(words.length + 1)
      for (let id = 1; id <= size; id++) { const word = wordOf(id); if (word >= 0) (offsets[word + 1] as number)++ }
      for (let word = 0; word < words.length; word++) offsets[word + 1] = (offsets[word + 1] as number) + (offsets[word] as number)
      const next = offsets.slice(0, words.length)
      const ids = new Uint32Array(offsets[words.length] as number)
      for (let id = 1; id <= size; id++) { const word = wordOf(id); if (word >= 0) ids[(next[word] as number)++] = id }
      return { words, offsets, ids }
    }
    this.#lists = [
      listOf(foldedWords.genera, (id) => genus[id] as number),
      listOf(foldedWords.species, (id) => speciesOf[id] as number),
      listOf(foldedWords.cultivars, (id) => cultivar[id] as number)
    ]
  }

  /** How many plants' folded names hold `term` (folded, without a space or a quote: it can only stand within a word). */
  matches (term: string): number {
    if (/[ ']/.test(term)) throw new Error(`a catalog term stands within a word: ${JSON.stringify(term)}`)
    const generation = ++this.#generation
    let count = 0
    for (const { words, offsets, ids } of this.#lists) {
      for (let word = 0; word < words.length; word++) {
        if (!(words[word] as string).includes(term)) continue
        for (let at = offsets[word] as number; at < (offsets[word + 1] as number); at++) {
          const id = ids[at] as number
          if (this.#marks[id] !== generation) {
            this.#marks[id] = generation
            count++
          }
        }
      }
    }
    return count
  }
}

/** The folded name of plant `id` as its words make it, which must be `foldName(nameOf(id))`: what CatalogIndex counts rests on it. */
export function checkFoldedWords (ids: Iterable<number>): void {
  for (const id of ids) {
    const words = wordsOf(id)
    const byWords = `${foldedWords.genera[words.genus] as string} ${foldedWords.species[words.species] as string}` +
      (words.cultivar < 0 ? '' : ` '${foldedWords.cultivars[words.cultivar] as string}'`)
    if (byWords !== foldName(nameOf(id))) throw new Error(`plant ${id}: ${JSON.stringify(nameOf(id))} folds to ${JSON.stringify(foldName(nameOf(id)))}, not ${JSON.stringify(byWords)}`)
  }
}

/**
 * Search terms of 3 to 8 characters cut from the folded words of random plants, each matching between
 * `least` and `most` plants of 1 to `index.size`, with how many: up to `wanted` distinct ones, out of
 * at most `tries` cuts.
 */
export function searchTerms (index: CatalogIndex, wanted: number, least: number, most: number, tries = 200_000): Map<string, number> {
  const terms = new Map<string, number>()
  const tried = new Set<string>()
  const random = seeded(least * 31 + most)
  for (let attempt = 0; attempt < tries && terms.size < wanted; attempt++) {
    const words = wordsOf(1 + random() % index.size)
    const candidates = [foldedWords.genera[words.genus] as string, foldedWords.species[words.species] as string,
      ...(words.cultivar < 0 ? [] : (foldedWords.cultivars[words.cultivar] as string).split(' '))]
    const word = [...(candidates[random() % candidates.length] as string)]
    if (word.length < 3) continue
    const length = 3 + random() % (Math.min(8, word.length) - 2)
    const start = random() % (word.length - length + 1)
    const term = word.slice(start, start + length).join('')
    if (tried.has(term)) continue
    tried.add(term)
    const count = index.matches(term)
    if (count >= least && count <= most) terms.set(term, count)
  }
  return terms
}

/** Rows of the catalog, `batch` at a time, with their folded names. */
export function * catalogBatches (size: number, batch: number) {
  for (let from = 1; from <= size; from += batch) {
    const ids: number[] = []
    const names: string[] = []
    const tags: string[] = []
    const folded: string[] = []
    for (let id = from; id < Math.min(from + batch, size + 1); id++) {
      const name = nameOf(id)
      ids.push(id)
      names.push(name)
      tags.push(tagOf(id))
      folded.push(foldName(name))
    }
    yield { ids, names, tags, folded }
  }
}
