import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type Response, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'

/**
 * The write side against a model in plain JavaScript (CONTRACT §2, §5, §6, §9, §13, §16): random
 * sequences of single and bulk creates, PATCHes (merging, `null` clearing, embedded relationship
 * syncs of either direction), PUTs by composite key (replacing or merging; creating what does not
 * exist), relationships created (a duplicate refused) and deleted, archives (which hide an asset's
 * relationships), dry runs, bulk requests refused whole for one bad item, and replays of the last
 * request under its Idempotency-Key; each single write and bulk create sent with the Admin key or
 * an Editor key of role `mixed` (a level per access domain: 403 and nothing written where it falls
 * short). After each request the answer is checked against the model; after each sequence, every
 * asset's and relationship's state, and the event feed request by request: one `asset.created` /
 * `asset.updated` / `asset.archived` per item that changed, `changes` listing exactly what changed
 * (`from`/`to`), `relationship.created` / `.deleted` for each relationship a request made or
 * removed, nothing for a request that changed nothing, a dry run, a refused request or a replay,
 * and sequence numbers in the order of the requests; the same events read again in small pages
 * through `filter[type]` or `filter[subject]` (by id or composite key), an asset's history (its
 * events and its relationships', newest first), and the feed as a key of narrower roles reads it
 * (the events of the assets it could see at the event; a move into its sight without the values
 * from before). A failure prints fast-check's seed and the shortest sequence it found.
 * KBIS_WRITE_MODEL_RUNS sets the number of sequences per store (10 by default; `npm run models`: 400).
 */
const RUNS = Number(process.env.KBIS_WRITE_MODEL_RUNS ?? 10)

type Properties = Record<string, unknown>
interface Values { name: string; access_domain_key: string | null; properties: Properties }
interface ModelAsset extends Values { id: string; hostname: string; archived: boolean }
type Changes = Record<string, { from?: unknown; to: unknown }>
/**
 * An event as compared: type, subject and `changes`; with the access domains its visibility is
 * decided on (the asset's at the event, or both ends'), and for an update the domain before it.
 */
interface ExpectedEvent { type: string; subject: string; changes?: Changes; domains: (string | null)[]; before?: string | null }
const assetEvent = (type: string, asset: ModelAsset): ExpectedEvent => ({ type, subject: `assets/${asset.id}`, domains: [asset.access_domain_key] })
/** `asset.updated` of `asset` (as it is after the change), moved from the domain `before`. */
const updatedEvent = (asset: ModelAsset, changes: Changes, before: string | null): ExpectedEvent => ({ ...assetEvent('asset.updated', asset), changes, before })

/** A `depends_on` relationship; its id is null until it is looked up (made by an embedded sync). */
interface ModelLink { id: string | null; source: ModelAsset; target: ModelAsset; deleted: boolean }
/** An embedded sync of one (direction, `depends_on`) pair: the related assets, by index among the live ones. */
interface SyncSpec { direction: 'outgoing' | 'incoming'; picks: number[] }

/** What a sequence has done so far, as the service should have it. */
interface Model {
  assets: ModelAsset[]
  links: ModelLink[]
  /** The events each request (by its X-Request-Id) should have written, in request order. */
  events: { requestId: string; events: ExpectedEvent[] }[]
  /** The last request sent, for a replay. */
  last: { method: string; url: string; body: unknown; idempotencyKey: string; requestId: string; status: number; text: string; apiKey: string | undefined } | null
  hostnames: number
}

interface Real {
  t: TestApp
  run: string
  requests: number
  /** An Editor key of role `mixed` (MIXED_LEVELS). */
  editorKey: string
}

/**
 * The levels of role `mixed` on servers, by access domain (`edit_access_domain` > `delete` >
 * `edit` > `view`), which the scoped Editor key of a command writes with (docs/access-model.md):
 * creating and updating need `edit`, archiving `delete`, moving to another domain
 * `edit_access_domain` on both, creating a relationship `edit` on its source.
 */
const MIXED_LEVELS = { it: 4, finance: 1, none: 3 } as const
const [EDIT, DELETE, MOVE] = [2, 3, 4]
const levelIn = (domain: string | null): number => MIXED_LEVELS[(domain ?? 'none') as keyof typeof MIXED_LEVELS]
/** Whether the Editor may change `asset` (in its domain `from`) to domain `to`. */
const mayChange = (from: string | null, to: string | null | undefined): boolean =>
  levelIn(from) >= EDIT && (to === undefined || to === from || (levelIn(from) >= MOVE && levelIn(to) >= MOVE))

const ENVIRONMENTS = ['dev', 'staging', 'prod']
const TAGS = ['pci', 'gdpr', 'legacy']
const propertyValue: Record<string, fc.Arbitrary<unknown>> = {
  environment: fc.constantFrom(...ENVIRONMENTS),
  cpu_count: fc.integer({ min: 1, max: 4 }),
  owner: fc.constantFrom('', 'ann', 'Ann', 'bob'),
  tags: fc.subarray(TAGS),
}
/** Property values as a write sends them: some keys, a value or `null` each. */
const properties: fc.Arbitrary<Properties> = fc.subarray(Object.keys(propertyValue))
  .chain((keys) => fc.record(Object.fromEntries(keys.map((k) => [k, fc.option(propertyValue[k]!, { nil: null, freq: 4 })]))))
const values = fc.record({
  name: fc.constantFrom('web', 'Web', 'db'),
  access_domain_key: fc.constantFrom('it', 'finance', null),
  properties,
})
const change = fc.record({ name: fc.constantFrom('web', 'Web', 'db'), access_domain_key: fc.constantFrom('it', 'finance', null), properties }, { requiredKeys: [] })

const isSet = (v: unknown): boolean => v !== null && v !== undefined
const same = (a: unknown, b: unknown): boolean => JSON.stringify(a ?? null) === JSON.stringify(b ?? null)
const withoutNulls = (p: Properties): Properties => Object.fromEntries(Object.entries(p).filter(([, v]) => isSet(v)))

/** `asset` after a PATCH-like merge (`merge`) or a replacement of its values. */
function applied(asset: Values, next: Partial<Values>, merge: boolean): Values {
  const props = merge ? { ...asset.properties, ...(next.properties ?? {}) } : { ...(next.properties ?? {}) }
  return {
    name: next.name ?? asset.name,
    access_domain_key: next.access_domain_key !== undefined ? next.access_domain_key : merge ? asset.access_domain_key : null,
    properties: withoutNulls(props),
  }
}

/** The `changes` of an `asset.updated` from `before` to `after`; empty when nothing changed. */
function changesOf(before: Values, after: Values): Changes {
  const changes: Changes = {}
  if (before.name !== after.name) changes.name = { from: before.name, to: after.name }
  if (before.access_domain_key !== after.access_domain_key) changes.access_domain_key = { from: before.access_domain_key, to: after.access_domain_key }
  for (const key of new Set([...Object.keys(before.properties), ...Object.keys(after.properties)])) {
    if (!same(before.properties[key], after.properties[key])) changes[`properties.${key}`] = { from: before.properties[key] ?? null, to: after.properties[key] ?? null }
  }
  return changes
}

const live = (m: Model) => m.assets.filter((a) => !a.archived)
/** The live asset a command's number picks (commands run only when there is one). */
const pickLive = (m: Model, n: number): ModelAsset => live(m)[n % live(m).length]!
/** The related assets an embedded sync lists, each once. */
const relatedOf = (m: Model, spec: SyncSpec): ModelAsset[] => [...new Set(spec.picks.map((p) => pickLive(m, p)))]
/** A hostname no asset has held. */
const newHostname = (m: Model, r: Real): string => `${r.run}-h${++m.hostnames}`
/** A new asset in the model: its id, its hostname, and the values a create stores (`null` properties left out). */
const created = (id: string, hostname: string, v: Partial<Values>): ModelAsset => ({ id, hostname, archived: false, ...applied({ name: '', access_domain_key: null, properties: {} }, v, false) })
/** Relationships that exist for the API: not deleted, both ends live. */
const visibleLinks = (m: Model) => m.links.filter((l) => !l.deleted && !l.source.archived && !l.target.archived)
/** A relationship event as compared: its type and ends (an embedded sync's ids are not known beforehand). */
const linkEvent = (type: string, l: { source: { id: string; access_domain_key?: string | null }; target: { id: string; access_domain_key?: string | null } }): ExpectedEvent => ({
  type, subject: `relationship ${l.source.id}>${l.target.id}`, domains: [l.source.access_domain_key ?? null, l.target.access_domain_key ?? null],
})

/** The relationships one request's syncs create and delete (a request's events are its net change). */
interface LinkChanges { created: Set<ModelLink>; deleted: Set<ModelLink> }
const noLinkChanges = (): LinkChanges => ({ created: new Set(), deleted: new Set() })

/**
 * An embedded sync of `asset` (CONTRACT §2, docs/relationships.md): the pair's visible
 * relationships to assets not listed are deleted, listed ones that are missing created; hidden
 * ones (an archived end) are left alone. Applied to the model, recorded in `changes`. Within one
 * request the syncs of its items add up to one change: a relationship an earlier item created and
 * a later one deleted never existed, one an earlier item deleted and a later one listed again stays.
 */
function sync(m: Model, asset: ModelAsset, spec: SyncSpec, changes: LinkChanges): void {
  const related = relatedOf(m, spec)
  const outgoing = spec.direction === 'outgoing'
  for (const link of visibleLinks(m)) {
    if ((outgoing ? link.source : link.target) !== asset) continue
    if (related.includes(outgoing ? link.target : link.source)) continue
    link.deleted = true
    if (changes.created.delete(link)) m.links.splice(m.links.indexOf(link), 1)
    else changes.deleted.add(link)
  }
  for (const other of related) {
    const [source, target] = outgoing ? [asset, other] : [other, asset]
    if (visibleLinks(m).some((l) => l.source === source && l.target === target)) continue
    const again = [...changes.deleted].find((l) => l.source === source && l.target === target)
    if (again !== undefined) {
      again.deleted = false
      changes.deleted.delete(again)
      continue
    }
    const link: ModelLink = { id: null, source, target, deleted: false }
    m.links.push(link)
    changes.created.add(link)
  }
}

const linkEvents = (changes: LinkChanges): ExpectedEvent[] => [
  ...[...changes.created].map((l) => linkEvent('relationship.created', l)),
  ...[...changes.deleted].map((l) => linkEvent('relationship.deleted', l)),
]

/** The body member of an embedded sync. */
function syncBody(m: Model, spec: SyncSpec | null): object {
  if (spec === null) return {}
  return { relationships: { [spec.direction]: { depends_on: { related_assets: relatedOf(m, spec).map((a) => ({ id: a.id })) } } } }
}

/** Looks up the ids of the relationships the model made without one (by an embedded sync). */
async function learnLinkIds(m: Model, r: Real): Promise<void> {
  for (const link of m.links.filter((l) => l.id === null && !l.deleted)) {
    const res = await r.t.request('GET', `/api/v1/relationships?filter[relationship_type_key]=depends_on&filter[source_asset_id]=${link.source.id}&filter[target_asset_id]=${link.target.id}`)
    expect(res.status).toBe(200)
    expect(res.body.data, `${link.source.id}>${link.target.id}`).toHaveLength(1)
    link.id = res.body.data[0].id
  }
}

/**
 * Sends a write as the model's next request: its own X-Request-Id and Idempotency-Key; with the
 * Admin key, or the scoped Editor key when `editor`.
 */
async function send(m: Model, r: Real, method: string, url: string, body?: unknown, editor = false): Promise<{ res: Response; requestId: string }> {
  const requestId = `${r.run}-${++r.requests}`
  const idempotencyKey = `key-${requestId}`
  const apiKey = editor ? r.editorKey : undefined
  const res = await r.t.request(method, url, { body, key: apiKey, headers: { 'x-request-id': requestId, 'idempotency-key': idempotencyKey } })
  m.last = { method, url, body, idempotencyKey, requestId, status: res.status, text: JSON.stringify(res.body), apiKey }
  return { res, requestId }
}

/** A write the scoped Editor may not make: 403 forbidden, nothing written or emitted. */
function forbidden(m: Model, res: Response, requestId: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(403)
  expect(res.body.errors[0].code).toBe('forbidden')
  expectEvents(m, requestId, [])
}

function expectEvents(m: Model, requestId: string, events: ExpectedEvent[]): void {
  m.events.push({ requestId, events })
}

const dryRun = (url: string, dry: boolean) => (dry ? `${url}${url.includes('?') ? '&' : '?'}dry_run=true` : url)

class Create implements fc.AsyncCommand<Model, Real> {
  constructor(readonly v: Values, readonly dry: boolean, readonly editor = false) {}
  check = () => true
  async run(m: Model, r: Real) {
    const hostname = newHostname(m, r)
    const body = { asset_type_key: 'server', name: this.v.name, access_domain_key: this.v.access_domain_key, properties: { ...this.v.properties, hostname } }
    const { res, requestId } = await send(m, r, 'POST', dryRun('/api/v1/assets', this.dry), body, this.editor)
    if (this.editor && levelIn(this.v.access_domain_key) < EDIT) return forbidden(m, res, requestId)
    if (this.dry) {
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return expectEvents(m, requestId, [])
    }
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const asset = created(res.body.data.id, hostname, body)
    m.assets.push(asset)
    expectEvents(m, requestId, [assetEvent('asset.created', asset)])
  }
  toString = () => `Create(${JSON.stringify(this.v)}${this.dry ? ', dry run' : ''}${this.editor ? ', editor' : ''})`
}

class Patch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number, readonly next: Partial<Values>, readonly sync: SyncSpec | null, readonly dry: boolean, readonly editor = false) {}
  check = (m: Readonly<Model>) => live(m as Model).length > 0
  async run(m: Model, r: Real) {
    const asset = pickLive(m, this.pick)
    const { res, requestId } = await send(m, r, 'PATCH', dryRun(`/api/v1/assets/${asset.id}`, this.dry), { ...this.next, ...syncBody(m, this.sync) }, this.editor)
    if (this.editor && !mayChange(asset.access_domain_key, this.next.access_domain_key)) return forbidden(m, res, requestId)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    if (this.dry) return expectEvents(m, requestId, [])
    const after = applied(asset, this.next, true)
    const [changes, before] = [changesOf(asset, after), asset.access_domain_key]
    Object.assign(asset, after)
    const links = noLinkChanges()
    if (this.sync !== null) sync(m, asset, this.sync, links)
    expectEvents(m, requestId, [...(Object.keys(changes).length === 0 ? [] : [updatedEvent(asset, changes, before)]), ...linkEvents(links)])
    expect(res.body.data).toMatchObject({ id: asset.id, name: asset.name, access_domain_key: asset.access_domain_key, properties: { ...asset.properties, hostname: asset.hostname } })
    await learnLinkIds(m, r)
  }
  toString = () => `Patch(#${this.pick}, ${JSON.stringify(this.next)}${this.sync ? `, sync ${JSON.stringify(this.sync)}` : ''}${this.dry ? ', dry run' : ''}${this.editor ? ', editor' : ''})`
}

/** PUT /assets/server:hostname:<h> of a live asset (`pick`) or of a new hostname (`pick` null). */
class Put implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number | null, readonly given: Values | 'as stored', readonly merge: boolean, readonly dry: boolean, readonly editor = false) {}
  check = (m: Readonly<Model>) => this.pick === null || live(m as Model).length > 0
  async run(m: Model, r: Real) {
    const asset = this.pick === null ? null : pickLive(m, this.pick)
    const v = this.given !== 'as stored' ? this.given : asset ?? START[0]!
    const hostname = asset?.hostname ?? newHostname(m, r)
    const body = { name: v.name, access_domain_key: v.access_domain_key, properties: { ...v.properties, hostname } }
    const url = dryRun(`/api/v1/assets/server:hostname:${hostname}${this.merge ? '?merge=true' : ''}`, this.dry)
    const { res, requestId } = await send(m, r, 'PUT', url, body, this.editor)
    if (this.editor && !(asset === null ? levelIn(body.access_domain_key) >= EDIT : mayChange(asset.access_domain_key, body.access_domain_key))) return forbidden(m, res, requestId)
    if (this.dry) {
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return expectEvents(m, requestId, [])
    }
    if (asset === null) {
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      const asset = created(res.body.data.id, hostname, body)
      m.assets.push(asset)
      return expectEvents(m, requestId, [assetEvent('asset.created', asset)])
    }
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const after = applied(asset, body, this.merge)
    const [changes, before] = [changesOf(asset, after), asset.access_domain_key]
    Object.assign(asset, after)
    expectEvents(m, requestId, Object.keys(changes).length === 0 ? [] : [updatedEvent(asset, changes, before)])
  }
  toString = () => `Put(${this.pick === null ? 'new' : `#${this.pick}`}, ${JSON.stringify(this.given)}${this.merge ? ', merge' : ''}${this.dry ? ', dry run' : ''}${this.editor ? ', editor' : ''})`
}

class BulkCreate implements fc.AsyncCommand<Model, Real> {
  constructor(readonly items: Values[], readonly badAt: number | null, readonly dry: boolean, readonly editor = false) {}
  check = () => true
  async run(m: Model, r: Real) {
    const hostnames = this.items.map(() => newHostname(m, r))
    const body = this.items.map((v, i) => ({
      asset_type_key: 'server', name: v.name, access_domain_key: v.access_domain_key, client_ref: `r${i}`,
      properties: { ...v.properties, hostname: hostnames[i], ...(this.badAt !== null && this.badAt % this.items.length === i ? { environment: 'moon' } : {}) },
    }))
    const { res, requestId } = await send(m, r, 'POST', dryRun('/api/v1/bulk/assets', this.dry), body, this.editor)
    if (this.editor && this.badAt === null && this.items.some((v) => levelIn(v.access_domain_key) < EDIT)) return forbidden(m, res, requestId)
    if (this.badAt !== null) {
      expect(res.status, JSON.stringify(res.body)).toBe(422)
      expect(res.body.errors.map((e: { meta?: { index?: number } }) => e.meta?.index)).toContain(this.badAt % this.items.length)
      return expectEvents(m, requestId, [])
    }
    if (this.dry) {
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.meta).toEqual({ dry_run: true, items: this.items.length })
      return expectEvents(m, requestId, [])
    }
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const made = body.map((item, i) => created(res.body.data[i].id, hostnames[i]!, item))
    m.assets.push(...made)
    expectEvents(m, requestId, made.map((a) => assetEvent('asset.created', a)))
  }
  toString = () => `BulkCreate(${JSON.stringify(this.items)}${this.badAt !== null ? `, bad item ${this.badAt}` : ''}${this.dry ? ', dry run' : ''}${this.editor ? ', editor' : ''})`
}

class BulkPatch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly picks: number[], readonly changes: Partial<Values>[], readonly syncs: (SyncSpec | null)[], readonly byKey: boolean, readonly dry: boolean) {}
  check = (m: Readonly<Model>) => live(m as Model).length > 0
  async run(m: Model, r: Real) {
    const assets = [...new Set(this.picks.map((p) => pickLive(m, p)))]
    const syncOf = (i: number) => this.syncs[i % this.syncs.length] ?? null
    const body = assets.map((a, i) => ({ id: this.byKey ? `server:hostname:${a.hostname}` : a.id, ...this.changes[i % this.changes.length], ...syncBody(m, syncOf(i)) }))
    const { res, requestId } = await send(m, r, 'PATCH', dryRun('/api/v1/bulk/assets', this.dry), body)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    if (this.dry) return expectEvents(m, requestId, [])
    const events: ExpectedEvent[] = []
    assets.forEach((asset, i) => {
      const after = applied(asset, this.changes[i % this.changes.length]!, true)
      const [changes, before] = [changesOf(asset, after), asset.access_domain_key]
      Object.assign(asset, after)
      if (Object.keys(changes).length > 0) events.push(updatedEvent(asset, changes, before))
    })
    // The items' syncs in item order, each on the relationships as the earlier items left them.
    const links = noLinkChanges()
    assets.forEach((asset, i) => {
      const spec = syncOf(i)
      if (spec !== null) sync(m, asset, spec, links)
    })
    expectEvents(m, requestId, [...events, ...linkEvents(links)])
    await learnLinkIds(m, r)
  }
  toString = () => `BulkPatch(${JSON.stringify(this.picks)}, ${JSON.stringify(this.changes)}, syncs ${JSON.stringify(this.syncs)}${this.byKey ? ', by composite key' : ''}${this.dry ? ', dry run' : ''})`
}

/** PUT /bulk/assets: each item a live asset (`pick`) or a new hostname (`null`). */
class BulkPut implements fc.AsyncCommand<Model, Real> {
  constructor(readonly picks: (number | null)[], readonly items: (Values | 'as stored')[], readonly dry: boolean) {}
  check = (m: Readonly<Model>) => this.picks.every((p) => p === null) || live(m as Model).length > 0
  async run(m: Model, r: Real) {
    const seen = new Set<ModelAsset>()
    const targets = this.picks.map((p) => {
      if (p === null) return null
      const asset = pickLive(m, p)
      if (seen.has(asset)) return undefined
      seen.add(asset)
      return asset
    }).filter((a): a is ModelAsset | null => a !== undefined)
    const hostnames = targets.map((a) => a?.hostname ?? newHostname(m, r))
    const body = targets.map((asset, i) => {
      const given = this.items[i % this.items.length]!
      const v = given !== 'as stored' ? given : asset ?? START[0]!
      return { id: `server:hostname:${hostnames[i]}`, client_ref: `r${i}`, name: v.name, access_domain_key: v.access_domain_key, properties: { ...v.properties, hostname: hostnames[i] } }
    })
    const { res, requestId } = await send(m, r, 'PUT', dryRun('/api/v1/bulk/assets', this.dry), body)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    if (this.dry) return expectEvents(m, requestId, [])
    const events: ExpectedEvent[] = []
    const results = targets.map((asset, i) => {
      const item = body[i]!
      const answered = res.body.data[i]
      if (asset === null) {
        const made = created(answered.id, hostnames[i]!, item)
        m.assets.push(made)
        events.push(assetEvent('asset.created', made))
        return 'created'
      }
      const after = applied(asset, item, false)
      const [changes, before] = [changesOf(asset, after), asset.access_domain_key]
      Object.assign(asset, after)
      if (Object.keys(changes).length === 0) return 'unchanged'
      events.push(updatedEvent(asset, changes, before))
      return 'updated'
    })
    expect((res.body.data as { result: string }[]).map((d) => d.result)).toEqual(results)
    expectEvents(m, requestId, events)
  }
  toString = () => `BulkPut(${JSON.stringify(this.picks)}, ${JSON.stringify(this.items)}${this.dry ? ', dry run' : ''})`
}

class Archive implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number, readonly editor = false) {}
  check = (m: Readonly<Model>) => live(m as Model).length > 0
  async run(m: Model, r: Real) {
    const asset = pickLive(m, this.pick)
    const { res, requestId } = await send(m, r, 'DELETE', `/api/v1/assets/${asset.id}`, undefined, this.editor)
    if (this.editor && levelIn(asset.access_domain_key) < DELETE) return forbidden(m, res, requestId)
    expect(res.status, JSON.stringify(res.body)).toBe(204)
    asset.archived = true
    expectEvents(m, requestId, [assetEvent('asset.archived', asset)])
  }
  toString = () => `Archive(#${this.pick}${this.editor ? ', editor' : ''})`
}

/** POST /relationships `depends_on` between two live assets: 201, or 409 when it exists. */
class Link implements fc.AsyncCommand<Model, Real> {
  constructor(readonly source: number, readonly target: number, readonly editor = false) {}
  check = (m: Readonly<Model>) => live(m as Model).length > 0
  async run(m: Model, r: Real) {
    const [source, target] = [pickLive(m, this.source), pickLive(m, this.target)]
    const body = { relationship_type_key: 'depends_on', source_asset_id: source.id, target_asset_id: `server:hostname:${target.hostname}` }
    const { res, requestId } = await send(m, r, 'POST', '/api/v1/relationships', body, this.editor)
    if (this.editor && levelIn(source.access_domain_key) < EDIT) return forbidden(m, res, requestId)
    if (visibleLinks(m).some((l) => l.source === source && l.target === target)) {
      expect(res.status, JSON.stringify(res.body)).toBe(409)
      expect(res.body.errors[0].code).toBe('duplicate_relationship')
      return expectEvents(m, requestId, [])
    }
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(res.body.data).toMatchObject({ source_asset_id: source.id, target_asset_id: target.id })
    const link: ModelLink = { id: res.body.data.id, source, target, deleted: false }
    m.links.push(link)
    expectEvents(m, requestId, [linkEvent('relationship.created', link)])
  }
  toString = () => `Link(#${this.source}, #${this.target}${this.editor ? ', editor' : ''})`
}

/** DELETE /relationships/{id} of a visible relationship. */
class Unlink implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => visibleLinks(m as Model).length > 0
  async run(m: Model, r: Real) {
    const link = visibleLinks(m)[this.pick % visibleLinks(m).length]!
    const { res, requestId } = await send(m, r, 'DELETE', `/api/v1/relationships/${link.id}`)
    expect(res.status, JSON.stringify(res.body)).toBe(204)
    link.deleted = true
    expectEvents(m, requestId, [linkEvent('relationship.deleted', link)])
  }
  toString = () => `Unlink(#${this.pick})`
}

/**
 * The last request again, with its Idempotency-Key and body: its first answer, and nothing
 * written. Sent with the first request's X-Request-Id: a replayed error answer is the first one
 * byte for byte, its `meta.request_id` included (CONTRACT §16), and the test client checks that
 * an error's request id is the response's. Any event the replay wrote would show under the first
 * request, whose events are compared exactly.
 */
class Replay implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => m.last !== null
  async run(m: Model, r: Real) {
    const last = m.last!
    const res = await r.t.request(last.method, last.url, { body: last.body, key: last.apiKey, headers: { 'x-request-id': last.requestId, 'idempotency-key': last.idempotencyKey } })
    expect(res.status).toBe(last.status)
    expect(JSON.stringify(res.body)).toBe(last.text)
    expect(res.headers['idempotent-replayed']).toBe('true')
  }
  toString = () => 'Replay'
}

const syncSpec: fc.Arbitrary<SyncSpec> = fc.record({ direction: fc.constantFrom<'outgoing' | 'incoming'>('outgoing', 'incoming'), picks: fc.array(fc.nat(), { maxLength: 3 }) })

const commands = [
  fc.tuple(values, fc.boolean(), fc.boolean()).map(([v, dry, editor]) => new Create(v, dry, editor)),
  // The Editor's PATCHes carry no relationships (an incoming pair's rules reach other assets' levels).
  fc.tuple(fc.nat(), change, fc.option(syncSpec, { nil: null }), fc.boolean(), fc.boolean()).map(([p, c, sync, dry, editor]) => new Patch(p, c, editor ? null : sync, dry, editor)),
  fc.tuple(fc.option(fc.nat(), { nil: null }), fc.oneof(values, fc.constant('as stored' as const)), fc.boolean(), fc.boolean(), fc.boolean())
    .map(([p, v, merge, dry, editor]) => new Put(p, v, merge, dry, editor)),
  fc.tuple(fc.array(values, { minLength: 1, maxLength: 4 }), fc.option(fc.nat(), { nil: null, freq: 3 }), fc.boolean(), fc.boolean())
    .map(([items, bad, dry, editor]) => new BulkCreate(items, bad, dry, editor)),
  fc.tuple(fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), fc.array(change, { minLength: 1, maxLength: 4 }), fc.array(fc.option(syncSpec, { nil: null }), { minLength: 1, maxLength: 4 }),
    fc.boolean(), fc.boolean()).map(([p, c, syncs, byKey, dry]) => new BulkPatch(p, c, syncs, byKey, dry)),
  fc.tuple(fc.nat(), fc.nat(), fc.boolean()).map(([a, b, editor]) => new Link(a, b, editor)),
  fc.nat().map((p) => new Unlink(p)),
  fc.tuple(fc.array(fc.option(fc.nat(), { nil: null }), { minLength: 1, maxLength: 4 }), fc.array(fc.oneof(values, fc.constant('as stored' as const)), { minLength: 1, maxLength: 4 }), fc.boolean())
    .map(([p, v, dry]) => new BulkPut(p, v, dry)),
  fc.tuple(fc.nat(), fc.boolean()).map(([p, editor]) => new Archive(p, editor)),
  fc.constant(new Replay()),
]

/** How a sequence's events are read again: page size, and a filter by type or by one asset (by id or composite key). */
const feedRead = fc.record({
  size: fc.integer({ min: 1, max: 9 }),
  types: fc.subarray(['asset.created', 'asset.updated', 'asset.archived', 'relationship.created', 'relationship.deleted'], { minLength: 1 }),
  bySubject: fc.boolean(),
  byKey: fc.boolean(),
  pick: fc.nat(),
})

/** ACME with role `mixed` (MIXED_LEVELS on servers), held by the owner. */
const MIXED_SETUP = {
  ...ACME,
  roles: [...ACME.roles, {
    key: 'mixed', name: 'Mixed', grants: [
      { access_domain_key: 'it', asset_type_keys: ['server'], level: 'edit_access_domain' },
      { access_domain_key: 'finance', asset_type_keys: ['server'], level: 'view' },
      { access_domain_key: null, asset_type_keys: ['server'], level: 'delete' },
    ],
  }],
  users: ACME.users.map((u) => (u.email === 'owner@acme.test' ? { ...u, role_keys: [...u.role_keys, 'mixed'] } : u)),
}

const START: Values[] = [
  { name: 'web', access_domain_key: 'it', properties: { environment: 'prod', cpu_count: 2, owner: 'ann', tags: ['pci', 'gdpr'] } },
  { name: 'db', access_domain_key: 'finance', properties: { environment: 'dev', tags: [] } },
  { name: 'Web', access_domain_key: null, properties: { owner: '' } },
  { name: 'web', access_domain_key: 'it', properties: {} },
]

interface FeedEvent {
  id: string
  type: string
  subject: string
  sequence: string
  requestid: string | null
  data: { object: { name?: string; source_asset_id?: string; target_asset_id?: string }; changes?: unknown }
}

/** Every event after `cursor`, and the cursor past them. */
async function readFeed(t: TestApp, cursor: string | null, key?: string): Promise<{ events: FeedEvent[]; cursor: string }> {
  const events: FeedEvent[] = []
  for (;;) {
    const res = await t.request('GET', `/api/v1/events?page[size]=1000${cursor === null ? '' : `&after=${encodeURIComponent(cursor)}`}`, { key })
    expect(res.status).toBe(200)
    events.push(...res.body.data)
    cursor = res.body.meta.next_cursor as string
    if (!res.body.meta.has_more) return { events, cursor }
  }
}

/**
 * The feed's events `got`, request by request (their `requestid`), against the model's: each
 * request's as `seen` shows them to the reader (null: not seen), compared by type, subject (a
 * relationship's by its ends) and `changes`, in any order within the request.
 */
function compareByRequest(m: Model, got: readonly FeedEvent[], seen: (e: ExpectedEvent) => ExpectedEvent | null): void {
  const asCompared = (e: Pick<ExpectedEvent, 'type' | 'subject' | 'changes'>) => ({ type: e.type, subject: e.subject, ...(e.changes === undefined ? {} : { changes: e.changes }) })
  const bySubject = (a: { subject: string }, b: { subject: string }) => a.subject.localeCompare(b.subject)
  for (const { requestId, events } of m.events) {
    const read = got.filter((e) => e.requestid === requestId).map((e) => asCompared(e.type.startsWith('relationship.')
      ? linkEvent(e.type, { source: { id: e.data.object.source_asset_id! }, target: { id: e.data.object.target_asset_id! } })
      : { type: e.type, subject: e.subject, ...(e.type === 'asset.updated' ? { changes: e.data.changes as Changes } : {}) }))
    const expected = events.map(seen).filter((e): e is ExpectedEvent => e !== null).map(asCompared)
    expect(read.sort(bySubject), requestId).toEqual(expected.sort(bySubject))
  }
}

for (const store of STORES) {
  describe(`${store}: writes against a model of their rules`, () => {
    let t: TestApp
    let runs = 0
    let scopedKey: string
    let editorKey: string

    beforeAll(async () => {
      t = await createTestApp(store, MIXED_SETUP)
      scopedKey = await t.givenKey({ type: 'Viewer', roles: ['it_editor'] })
      editorKey = await t.givenKey({ type: 'Editor', roles: ['mixed'] })
    })
    afterAll(async () => t.close())

    it('changes, answers and emits what the model says, request by request', { timeout: 300_000 }, async () => {
      let cursor: string | null = null
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { maxCommands: 20, size: 'max' }), feedRead, async (cmds, reading) => {
          // Start after every event so far (the setup's keys, earlier runs, a run that failed
          // half-way), once the relay has stamped them: each run reads only its own.
          await t.settled()
          cursor = (await readFeed(t, cursor)).cursor
          const start = cursor
          const m: Model = { assets: [], links: [], events: [], last: null, hostnames: 0 }
          const r: Real = { t, run: `w${++runs}`, requests: 0, editorKey }
          // Four assets to start from, so that the commands on live assets run from the first one.
          await new BulkCreate(START, null, false).run(m, r)
          await fc.asyncModelRun(() => ({ model: m, real: r }), cmds)

          for (const asset of m.assets) {
            const res = await t.request('GET', `/api/v1/assets/${asset.id}`)
            if (asset.archived) {
              expect(res.status).toBe(404)
              continue
            }
            expect(res.status).toBe(200)
            expect({ name: res.body.data.name, access_domain_key: res.body.data.access_domain_key, properties: res.body.data.properties })
              .toEqual({ name: asset.name, access_domain_key: asset.access_domain_key, properties: { ...asset.properties, hostname: asset.hostname } })
          }

          for (const link of m.links) {
            const res = await t.request('GET', `/api/v1/relationships/${link.id}`)
            const visible = !link.deleted && !link.source.archived && !link.target.archived
            expect(res.status, `${link.id} ${visible ? 'visible' : 'deleted or hidden'}`).toBe(visible ? 200 : 404)
            if (visible) expect(res.body.data).toMatchObject({ relationship_type_key: 'depends_on', source_asset_id: link.source.id, target_asset_id: link.target.id })
          }

          await t.settled()
          const feed = await readFeed(t, cursor)
          const ours = feed.events.filter((e) => e.requestid?.startsWith(`${r.run}-`))
          expect(ours).toHaveLength(feed.events.length)
          compareByRequest(m, ours, (e) => e)
          // Sequence numbers follow the requests' order (each request committed before the next was sent).
          const sequences = ours.map((e) => BigInt(e.sequence))
          expect(sequences).toEqual([...sequences].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
          const order = m.events.filter((x) => x.events.length > 0).map((x) => x.requestId)
          expect([...new Set(ours.map((e) => e.requestid))]).toEqual(order)

          // The same events read again in small pages through a filter: the filtered list, in order.
          const subjectOf = (asset: ModelAsset) => `assets/${reading.byKey ? `server:hostname:${asset.hostname}` : asset.id}`
          const named = live(m)[reading.pick % Math.max(live(m).length, 1)]
          const query = reading.bySubject && named !== undefined ? `&filter[subject]=${encodeURIComponent(subjectOf(named))}` : `&filter[type]=${reading.types.join(',')}`
          const paged: FeedEvent[] = []
          for (let after = start; ;) {
            const res = await t.request('GET', `/api/v1/events?page[size]=${reading.size}&after=${encodeURIComponent(after)}${query}`)
            expect(res.status, JSON.stringify(res.body)).toBe(200)
            expect(res.body.data.length).toBeLessThanOrEqual(reading.size)
            paged.push(...res.body.data)
            after = res.body.meta.next_cursor
            if (!res.body.meta.has_more) break
          }
          const wanted = reading.bySubject && named !== undefined ? (e: FeedEvent) => e.subject === `assets/${named.id}` : (e: FeedEvent) => reading.types.includes(e.type)
          expect(paged.map((e) => e.id), query).toEqual(ours.filter(wanted).map((e) => e.id))

          // A live asset's history: its events and those of the relationships that touch it, newest first.
          if (named !== undefined) {
            const res = await t.request('GET', `/api/v1/assets/${named.id}/history?page[size]=100`)
            expect(res.status).toBe(200)
            const touches = (e: FeedEvent) => e.subject === `assets/${named.id}` || e.data.object.source_asset_id === named.id || e.data.object.target_asset_id === named.id
            expect((res.body.data as FeedEvent[]).map((e) => e.id)).toEqual(ours.filter(touches).map((e) => e.id).reverse())
          }

          // A key of narrower roles (servers of `it` and `finance`, none without a domain) reads the
          // events of the assets it could see at the event; a move into its sight without `from`.
          const scoped = (await readFeed(t, start, scopedKey)).events
          compareByRequest(m, scoped, (e) => {
            if (!e.domains.every((d) => d === 'it' || d === 'finance')) return null
            if (e.changes === undefined || e.before === 'it' || e.before === 'finance') return e
            return { ...e, changes: Object.fromEntries(Object.entries(e.changes).map(([k, v]) => [k, { to: v.to }])) }
          })
        }),
        { numRuns: RUNS },
      )
    })
  })
}
