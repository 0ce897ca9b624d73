/** Ids in ascending order, for keyset pages. */
export class SortedIds {
  private readonly ids: bigint[] = []

  get size (): number {
    return this.ids.length
  }

  insert (id: bigint): void {
    const last = this.ids.at(-1)
    if (last === undefined || id > last) this.ids.push(id)
    else this.ids.splice(this.positionAfter(id), 0, id)
  }

  remove (id: bigint): void {
    this.ids.splice(this.positionAfter(id, true), 1)
  }

  /** Up to `count` ids greater than `after` (all from the smallest when it is undefined). */
  page (after: bigint | undefined, count: number): bigint[] {
    const start = after === undefined ? 0 : this.positionAfter(after)
    return this.ids.slice(start, start + count)
  }

  /** The index of the first id greater than `id` (or of `id` itself, when `inclusive`). */
  private positionAfter (id: bigint, inclusive = false): number {
    let low = 0
    let high = this.ids.length
    while (low < high) {
      const middle = (low + high) >>> 1
      const candidate = this.ids[middle] as bigint
      if (candidate < id || (!inclusive && candidate === id)) low = middle + 1
      else high = middle
    }
    return low
  }
}
