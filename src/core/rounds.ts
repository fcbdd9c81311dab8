/**
 * A periodic job of the server (retention, purges): `round` every `everyMs`, and a first time
 * `firstMs` after the start (at most `everyMs`), not an interval later: a process restarted more
 * often than the interval (deploys, a crash loop) would otherwise never run it. The timers do not
 * keep the process alive. Returns what stops them.
 */
export function scheduleRounds(round: () => void, everyMs: number, firstMs: number): () => void {
  const interval = setInterval(round, everyMs)
  interval.unref()
  const first = setTimeout(round, Math.min(everyMs, firstMs))
  first.unref()
  return () => {
    clearInterval(interval)
    clearTimeout(first)
  }
}

/** When the first round of a periodic job runs: after the start's own work, well before its interval. */
export const FIRST_ROUND_AFTER_MS = 60_000
