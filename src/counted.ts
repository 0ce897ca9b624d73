/** `1 plant`, `2 plants`: a count and its noun, for the lines commands print. */
export function counted (count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`
}
