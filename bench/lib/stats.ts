import { performance } from 'node:perf_hooks'

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Milliseconds taken by `fn`, and its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const start = performance.now()
  const result = await fn()
  return { ms: performance.now() - start, result }
}

export interface Pair {
  ours: number[]
  raw: number[]
}

/** Ours and raw alternate which goes first, so neither always meets a warmer cache. */
export async function alternate(runs: number, ours: (r: number) => Promise<number>, raw: (r: number) => Promise<number>): Promise<Pair> {
  const pair: Pair = { ours: [], raw: [] }
  for (let r = 0; r < runs; r++) {
    if (r % 2 === 0) {
      pair.ours.push(await ours(r))
      pair.raw.push(await raw(r))
    } else {
      pair.raw.push(await raw(r))
      pair.ours.push(await ours(r))
    }
  }
  return pair
}
