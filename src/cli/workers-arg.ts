import { availableParallelism } from 'node:os'
import { InvalidArgumentError } from 'commander'

/** `--workers <n|auto>`: `auto` is the number of CPUs this process may use. */
export function workersArg(value: string): number {
  if (value === 'auto') return availableParallelism()
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1 || n > 256) throw new InvalidArgumentError('must be a number of processes 1..256 or "auto"')
  return n
}
