import { afterEach, describe, expect, it, vi } from 'vitest'
import { EventRelay, type RelayRetry } from '../../src/events/relay.js'
import type { Db } from '../../src/store/db.js'

/** A PostgreSQL store that fails every statement while `down`, and else has nothing to stamp. */
function flakyStore(): Db & { down: boolean; statements: number } {
  const store = {
    kind: 'postgres' as const,
    down: true,
    statements: 0,
    onQuery: null,
    async query<R>() {
      store.statements++
      if (store.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432')
      return { rows: [{ yes: false }] as R[], rowCount: 1 }
    },
    transaction: () => Promise.reject(new Error('not used')),
    listen: async () => undefined,
    notify: async () => undefined,
    close: async () => undefined,
  }
  return store
}

describe('event relay: rounds that fail back off', () => {
  afterEach(() => void vi.useRealTimers())

  it('waits 250 ms, doubling to 5 s, between failed rounds; marks identical failures as repeated; resets once a round succeeds', async () => {
    // Setup: a 100 ms poll over a store that is down (fake clock: no real waiting).
    vi.useFakeTimers()
    const store = flakyStore()
    const failures: RelayRetry[] = []
    const relay = new EventRelay(store, { intervalMs: 100, retentionDays: 0, publishes: false, onRoundFailed: (_err, retry) => void failures.push(retry) })

    // Action: 20 s of polling while the store is down.
    relay.start()
    await vi.advanceTimersByTimeAsync(20_000)

    // Assert: one failure per back-off step, not one per poll (200).
    expect(failures).toEqual([
      { failures: 1, repeated: false, retryInMs: 250 },
      { failures: 2, repeated: true, retryInMs: 500 },
      { failures: 3, repeated: true, retryInMs: 1000 },
      { failures: 4, repeated: true, retryInMs: 2000 },
      { failures: 5, repeated: true, retryInMs: 4000 },
      { failures: 6, repeated: true, retryInMs: 5000 },
      { failures: 7, repeated: true, retryInMs: 5000 },
      { failures: 8, repeated: true, retryInMs: 5000 },
    ])

    // Action: the store is back; a round succeeds; then it goes down again.
    store.down = false
    await vi.advanceTimersByTimeAsync(5_000)
    const statements = store.statements
    await vi.advanceTimersByTimeAsync(1_000)
    expect(store.statements - statements).toBe(10)
    store.down = true
    failures.length = 0
    await vi.advanceTimersByTimeAsync(700)

    // Assert: the back-off starts again from its first step.
    expect(failures).toEqual([
      { failures: 1, repeated: false, retryInMs: 250 },
      { failures: 2, repeated: true, retryInMs: 500 },
    ])
    await relay.stop()
  })

  it('runs its first retention round a minute after the start, not an interval later, then every interval', async () => {
    // A process restarted more often than hourly (deploys, a crash loop) would otherwise never purge.
    vi.useFakeTimers()
    const store = flakyStore()
    store.down = false
    let rounds = 0
    store.transaction = (() => {
      rounds++
      return Promise.reject(new Error('counted'))
    }) as Db['transaction']
    const relay = new EventRelay(store, { intervalMs: 100, retentionDays: 90, publishes: false, onError: () => undefined })
    relay.start()
    await vi.advanceTimersByTimeAsync(59_000)
    expect(rounds).toBe(0)
    await vi.advanceTimersByTimeAsync(2_000)
    expect(rounds).toBe(1)
    await vi.advanceTimersByTimeAsync(3_600_000 - 61_000)
    expect(rounds).toBe(2)
    await relay.stop()
  })
})
