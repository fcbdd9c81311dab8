/**
 * Compilations of route schemas put off until a request first needs them (decision 0030), by the
 * route and part that registered them: the validators (core/validators.ts) and the serializers
 * (core/serializer.ts) of every app of the process.
 */
const pending = new Map<() => unknown, string>()

/**
 * `compile`, run once, by the first call of the function returned (which then answers its result),
 * or by compilePending. A compile that throws (a schema the compiler refuses, a defect of the
 * route) throws for each call, and is no longer pending.
 */
export function compileLater<T>(where: string, compile: () => T): () => T {
  let compiled: { value: T } | null = null
  const run = (): T => {
    if (compiled === null) {
      pending.delete(run)
      compiled = { value: compile() }
    }
    return compiled.value
  }
  pending.set(run, where)
  return run
}

/** Runs every compilation still pending; how many it ran. The first that throws is named by its route and part. */
export function compilePending(): number {
  const runs = [...pending]
  for (const [run, where] of runs) {
    try {
      run()
    } catch (err) {
      throw new Error(`${where}: ${(err as Error).message}`, { cause: err })
    }
  }
  return runs.length
}
