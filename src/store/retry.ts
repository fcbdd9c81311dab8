/**
 * Transient conflicts inside the store (CONTRACT §1: "retried by the server, never answered as an
 * error while a retry can succeed"): a deadlock (40P01) or a serialization failure (40001) rolls
 * the whole transaction back, and running it again from the start can succeed.
 */
export function isTransientConflict(err: unknown): boolean {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined
  return code === '40P01' || code === '40001'
}

/**
 * A conflict the service finds itself and knows to be transient: a row another transaction
 * committed meanwhile (a concurrent upsert created the asset this one was about to create).
 * Running the transaction again sees that row. Carries a serialization failure's code.
 */
export class TransientConflict extends Error {
  readonly code = '40001'
}

/** Attempts in all (the first and the retries); the last failure is answered (503, Retry-After). */
export const TRANSACTION_ATTEMPTS = 5

/**
 * Runs `attempt` again while it fails with a transient conflict, at most TRANSACTION_ATTEMPTS
 * times, after a short jittered back-off (≈ 5, 10, 20, 40 ms, each ×0.5–1.5) so that the two
 * parties of a deadlock do not meet again in step. `onRetry` counts them (tests, logs).
 */
export async function retryTransient<T>(attempt: () => Promise<T>, onRetry?: (err: unknown, n: number) => void): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt()
    } catch (err) {
      if (n >= TRANSACTION_ATTEMPTS || !isTransientConflict(err)) throw err
      onRetry?.(err, n)
      await new Promise((resolve) => setTimeout(resolve, 5 * 2 ** (n - 1) * (0.5 + Math.random())))
    }
  }
}
