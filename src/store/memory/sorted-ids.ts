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

  /**
   * The ids after `after` in ascending order (below it in descending order), from the start when it is
   * undefined, that pass `accept`; at most `count` of them.
   */
  page (after: bigint | undefined, count: number, descending = false, accept?: (id: bigint) => boolean): bigint[] {
    const { ids } = this
    const page: bigint[] = []
    if (!descending) {
      for (let index = after === undefined ? 0 : this.positionAfter(after); index < ids.length && page.length < count; index++) {
        const id = ids[index] as bigint
        if (accept === undefined || accept(id)) page.push(id)
      }
    } else {
      for (let index = (after === undefined ? ids.length : this.positionAfter(after, true)) - 1; index >= 0 && page.length < count; index--) {
        const id = ids[index] as bigint
        if (accept === undefined || accept(id)) page.push(id)
      }
    }
    return page
  }

  /** Every id, ascending. */
  all (): readonly bigint[] {
    return this.ids
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
