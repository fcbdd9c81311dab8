import { expect } from 'vitest'
import type { TestApp } from './app.js'

/**
 * Seeding through the API's bulk endpoints: one request per 10,000 items instead of one per item,
 * so suites that only need data in the store do not pay a round trip (and a transaction) per row.
 * Every answer is checked, so a seed that fails fails the suite where it happens.
 */

/** The most items one bulk request takes (CONTRACT §5). */
const BULK_LIMIT = 10_000

export interface SeedAsset {
  name: string
  access_domain_key?: string | null
  properties?: Record<string, unknown>
}

export interface SeedRelationship {
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
}

async function bulk(t: TestApp, path: string, items: readonly unknown[], key?: string): Promise<string[]> {
  const ids: string[] = []
  for (let from = 0; from < items.length; from += BULK_LIMIT) {
    const res = await t.request('POST', path, { body: items.slice(from, from + BULK_LIMIT), ...(key === undefined ? {} : { key }) })
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(201)
    ids.push(...res.body.data.map((d: { id: string }) => d.id))
  }
  return ids
}

/** Creates assets of one type, in order; returns their ids in the same order. */
export async function bulkCreateAssets(t: TestApp, type: string, assets: readonly SeedAsset[], key?: string): Promise<string[]> {
  return bulk(t, '/api/v1/bulk/assets', assets.map((a) => ({ asset_type_key: type, ...a })), key)
}

/**
 * Creates assets of several types, type by type in the order given, each list in its order (the
 * order the suites' expectations of "oldest first" rely on); returns ids by asset name.
 */
export async function seedAssets(t: TestApp, byType: ReadonlyArray<readonly [string, readonly SeedAsset[]]>): Promise<Record<string, string>> {
  const ids: Record<string, string> = {}
  for (const [type, assets] of byType) {
    const created = await bulkCreateAssets(t, type, assets)
    assets.forEach((a, i) => { ids[a.name] = created[i]! })
  }
  return ids
}

/** Creates relationships (ends as UUIDs or composite keys), in order; returns their ids. */
export async function bulkCreateRelationships(t: TestApp, relationships: readonly SeedRelationship[]): Promise<string[]> {
  return bulk(t, '/api/v1/bulk/relationships', relationships)
}
