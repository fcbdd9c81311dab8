import { describe, expect, it } from 'vitest'
import { COUNT_TTL_MS, ResultCache, noteDataWrite } from '../../../src/counts/cache.js'
import type { Tx } from '../../../src/store/db.js'

/** A transaction stand-in that only collects its commit hooks (the store is not under test here). */
function openTx(): Tx & { commit(): void } {
  const hooks: (() => void)[] = []
  return {
    kind: 'pglite',
    query: async () => ({ rows: [], rowCount: 0 }),
    afterCommit: (fn) => void hooks.push(fn),
    commit: () => hooks.forEach((fn) => fn()),
  }
}

describe('the count cache', () => {
  const org = 'org-a'
  const other = 'org-b'

  it('answers a count remembered in the same generation, for the same statement only', async () => {
    const cache = new ResultCache(10)
    cache.memo(org).write('q1', 42)
    expect(await cache.memo(org).read('q1')).toBe(42)
    expect(await cache.memo(org).read('q2')).toBeUndefined()
    expect(await cache.memo(other).read('q1')).toBeUndefined()
    cache.close()
  })

  it('forgets an organization once a write to it commits, not before, and not other organizations', async () => {
    const cache = new ResultCache(10)
    cache.memo(org).write('q', 1)
    cache.memo(other).write('q', 2)
    const tx = openTx()
    noteDataWrite(tx, org)
    // Not committed yet: other requests still see the committed data, and its count.
    expect(await cache.memo(org).read('q')).toBe(1)
    tx.commit()
    expect(await cache.memo(org).read('q')).toBeUndefined()
    expect(await cache.memo(other).read('q')).toBe(2)
    cache.close()
  })

  it('a write outside a transaction (already committed) forgets at once', async () => {
    const cache = new ResultCache(10)
    cache.memo(org).write('q', 1)
    noteDataWrite({ kind: 'pglite', query: async () => ({ rows: [], rowCount: 0 }) }, org)
    expect(await cache.memo(org).read('q')).toBeUndefined()
    cache.close()
  })

  it('does not remember a count taken while a write committed (it may predate the write)', async () => {
    const cache = new ResultCache(10)
    const memo = cache.memo(org) // the request starts, its count runs …
    const tx = openTx()
    noteDataWrite(tx, org)
    tx.commit() // … a write commits meanwhile …
    memo.write('q', 7) // … and the count arrives: not kept.
    expect(await cache.memo(org).read('q')).toBeUndefined()
    cache.close()
  })

  it('takes a count again after the time limit, whatever the notifications said', async () => {
    let now = 1_000
    const cache = new ResultCache(10, () => now)
    cache.memo(org).write('q', 3)
    now += COUNT_TTL_MS
    expect(await cache.memo(org).read('q')).toBe(3)
    now += 1
    expect(await cache.memo(org).read('q')).toBeUndefined()
    cache.close()
  })

  it('keeps at most its capacity, dropping the oldest first; changed() without an organization forgets all', async () => {
    const cache = new ResultCache(3)
    for (const [i, q] of ['a', 'b', 'c', 'd'].entries()) cache.memo(org).write(q, i)
    expect(await Promise.all(['a', 'b', 'c', 'd'].map((q) => cache.memo(org).read(q)))).toEqual([undefined, 1, 2, 3])
    cache.memo(other).write('e', 4)
    expect(await cache.memo(org).read('b')).toBeUndefined()
    expect(await cache.memo(other).read('e')).toBe(4)
    cache.changed()
    expect(await Promise.all([cache.memo(org).read('d'), cache.memo(other).read('e')])).toEqual([undefined, undefined])
    cache.close()
  })

  it('weighs an answer by its rows: evicts by weight, keeps none over a quarter of the capacity', async () => {
    const cache = new ResultCache(40)
    const answers = cache.memo<string[]>(org, { kind: 'analytics' })
    answers.write('big', ['x'], 11)
    expect(await cache.memo<string[]>(org, { kind: 'analytics' }).read('big')).toBeUndefined()
    answers.write('a', ['a'], 10)
    answers.write('b', ['b'], 10)
    for (const q of ['c1', 'c2', 'c3', 'c4', 'c5']) cache.memo(org).write(q, 1)
    expect(await cache.memo<string[]>(org, { kind: 'analytics' }).read('a')).toEqual(['a'])
    // 25 rows held; 20 more make 45: the oldest (answer a, 10 rows) goes, and nothing else.
    answers.write('d', ['d'], 10)
    answers.write('f', ['f'], 10)
    const read = (q: string) => cache.memo<string[]>(org, { kind: 'analytics' }).read(q)
    expect(await Promise.all(['a', 'b', 'd', 'f'].map(read))).toEqual([undefined, ['b'], ['d'], ['f']])
    expect(await cache.memo(org).read('c1')).toBe(1)
    // Rewriting a statement replaces its weight: b goes from 10 rows to 1 (26 held), room for 10 more.
    answers.write('b', ['b2'], 1)
    answers.write('e', ['e'], 10)
    expect(await Promise.all(['b', 'd', 'e', 'f'].map(read))).toEqual([['b2'], ['d'], ['e'], ['f']])
    expect(await cache.memo(org).read('c1')).toBe(1)
    cache.close()
  })

  it('keeps each kind of result apart; a fresh memo reads nothing and still remembers; every read is told', async () => {
    const reads: string[] = []
    const cache = new ResultCache(10, Date.now, 0, (kind, outcome) => reads.push(`${kind} ${outcome}`))
    cache.memo(org).write('q', 7)
    expect(await cache.memo(org, { kind: 'analytics' }).read('q')).toBeUndefined()
    expect(await cache.memo(org, { fresh: true }).read('q')).toBeUndefined()
    cache.memo(org, { fresh: true }).write('q', 8)
    expect(await cache.memo(org).read('q')).toBe(8)
    expect(reads).toEqual(['analytics miss', 'count fresh', 'count hit'])
    cache.close()
  })

  it('answers a result only for the store\'s data version it was taken at, and nothing while writes are being stamped', async () => {
    const cache = new ResultCache(10)
    let current: string | null = '7'
    let asked = 0
    const memo = () => cache.memo(org, { version: { ask: async () => { asked++; return current }, sql: (o) => `version of ${o}` } })
    const first = memo()
    expect(await first.read('q')).toBeUndefined()
    first.write('q', 1)
    expect(await first.read('other')).toBeUndefined()
    expect(asked).toBe(1) // once per memo (one request)
    expect(await memo().read('q')).toBe(1)
    // Another process committed and its events are not stamped yet: nothing read, nothing kept.
    current = null
    const during = memo()
    expect(await during.read('q')).toBeUndefined()
    during.write('q', 2)
    // Stamped: a new version, the old result is not answered.
    current = '9'
    expect(await memo().read('q')).toBeUndefined()
    const after = memo()
    await after.read('q')
    after.write('q', 3)
    expect(await memo().read('q')).toBe(3)
    cache.close()
  })

  it('takes the data version a statement of the request read along with its page, and asks for it only without one', async () => {
    const cache = new ResultCache(10)
    let asked = 0
    const memo = () => cache.memo(org, { version: { ask: async () => { asked++; return '7' }, sql: (o) => `SELECT v FROM versions WHERE org = ${o}` } })
    const first = memo()
    expect(first.version?.orgId).toBe(org)
    expect(first.version?.sql('$4')).toBe('SELECT v FROM versions WHERE org = $4')
    first.version?.heard('7')
    expect(await first.read('q')).toBeUndefined()
    first.write('q', 1)
    expect(asked).toBe(0)
    // The version heard decides: the same one answers, another does not, null (being stamped) neither.
    const same = memo()
    same.version?.heard('7')
    expect(await same.read('q')).toBe(1)
    const newer = memo()
    newer.version?.heard('8')
    expect(await newer.read('q')).toBeUndefined()
    const stamping = memo()
    stamping.version?.heard(null)
    expect(await stamping.read('q')).toBeUndefined()
    stamping.write('q', 2)
    expect(asked).toBe(0)
    // Heard after the first read: the version asked before it stays (the result is taken after it).
    const late = memo()
    expect(await late.read('q')).toBe(1)
    late.version?.heard('8')
    expect(await late.read('q')).toBe(1)
    expect(asked).toBe(1)
    // Without a version source the memo offers none.
    expect(cache.memo(org).version).toBeUndefined()
    cache.close()
  })

  it('a closed cache no longer hears commits; capacity 0 remembers nothing', async () => {
    const closed = new ResultCache(10)
    closed.memo(org).write('q', 1)
    closed.close()
    const tx = openTx()
    noteDataWrite(tx, org)
    tx.commit()
    expect(await closed.memo(org).read('q')).toBe(1)
    const none = new ResultCache(0)
    none.memo(org).write('q', 1)
    expect(await none.memo(org).read('q')).toBeUndefined()
    none.close()
  })

  describe('with a read replica', () => {
    const LAG = 2_000

    it('keeps the replica\'s counts apart from the primary\'s', async () => {
      let now = 10_000
      const cache = new ResultCache(10, () => now, LAG)
      now += LAG
      cache.memo(org, { source: 'replica' }).write('q', 5)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBe(5)
      // A key that has just written reads from the primary: never the replica's figure.
      expect(await cache.memo(org, { source: 'primary' }).read('q')).toBeUndefined()
      cache.memo(org, { source: 'primary' }).write('q', 6)
      expect(await cache.memo(org, { source: 'primary' }).read('q')).toBe(6)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBe(5)
      cache.close()
    })

    it('remembers a replica count only once the generation is older than the replica\'s lag', async () => {
      let now = 10_000
      const cache = new ResultCache(10, () => now, LAG)
      // Just started: the replica may still miss writes made before this process started.
      cache.memo(org, { source: 'replica' }).write('q', 1)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBeUndefined()
      now += LAG
      cache.memo(org, { source: 'replica' }).write('q', 1)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBe(1)
      const tx = openTx()
      noteDataWrite(tx, org)
      tx.commit()
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBeUndefined()
      // Taken while the replica may not have replayed the write yet: answered, not remembered.
      now += LAG - 1
      cache.memo(org, { source: 'replica' }).write('q', 1)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBeUndefined()
      // The primary's counts follow the commit at once.
      cache.memo(org, { source: 'primary' }).write('q', 2)
      expect(await cache.memo(org, { source: 'primary' }).read('q')).toBe(2)
      now += 1
      cache.memo(org, { source: 'replica' }).write('q', 2)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBe(2)
      // Another organization's generation is its own.
      cache.memo(other, { source: 'replica' }).write('q', 9)
      expect(await cache.memo(other, { source: 'replica' }).read('q')).toBe(9)
      // Anything may have changed (a reconnection): the lag starts again for everyone.
      cache.changed()
      cache.memo(other, { source: 'replica' }).write('q', 9)
      expect(await cache.memo(other, { source: 'replica' }).read('q')).toBeUndefined()
      cache.close()
    })

    it('judges the lag from when the request began, not when its count ends', async () => {
      let now = 10_000
      const cache = new ResultCache(10, () => now, LAG)
      const memo = cache.memo(org, { source: 'replica' })
      now += LAG
      memo.write('q', 3)
      expect(await cache.memo(org, { source: 'replica' }).read('q')).toBeUndefined()
      cache.close()
    })
  })
})
