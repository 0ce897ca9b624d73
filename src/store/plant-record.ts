/** A plant as the store holds it, and how plants are made and compared: the words every layer shares. */

export interface PlantRecord {
  readonly id: bigint
  readonly name: string
  /** Absent when the plant was created without a tag; an empty tag is a different value. */
  readonly tag?: string
}

export function samePlant (a: PlantRecord, b: PlantRecord): boolean {
  return a.id === b.id && a.name === b.name && a.tag === b.tag
}

/** Both absent, or the same plant. */
export function sameState (a: PlantRecord | undefined, b: PlantRecord | undefined): boolean {
  return a === undefined || b === undefined ? a === b : samePlant(a, b)
}

/** A row of the `plants` table as the SQL adapters read it: a plant without a tag has NULL. */
export interface PlantRow { readonly id: bigint, readonly name: string, readonly tag: string | null }

export function recordOfRow (row: PlantRow): PlantRecord {
  return plantRecord(row.id, row.name, row.tag)
}

/** A plant; a tag that is null or undefined is no tag. */
export function plantRecord (id: bigint, name: string, tag: string | null | undefined): PlantRecord {
  return tag === null || tag === undefined ? { id, name } : { id, name, tag }
}
