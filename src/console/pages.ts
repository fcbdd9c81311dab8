import type { FastifyInstance, FastifyRequest } from 'fastify'
import { searchAssets } from '../search/assets.js'
import { getAsset } from '../assets/service.js'
import { includeRelationships } from '../relationships/include.js'
import { hasLevel } from '../access/scope.js'
import { listArchivedAssets, restoreArchivedAsset } from '../assets/restore.js'
import { deleteArchivedAsset } from '../assets/purge.js'
import { selectArchivedAssets } from '../assets/sql.js'
import { AppError, Errors } from '../core/errors.js'
import { isUuid } from '../core/time.js'
import type { PageMeta } from '../core/pagination.js'
import { backWithRefusal, field, query, redirectWith, render, renderPartial } from './plugin.js'
import { assetHistory } from './history.js'
import { pageOf } from './return-to.js'

const PAGE_SIZE = 25

/** The page asked for in `name` (`page`; an asset's tables each have their own), 1 when absent or odd. */
function pageNumber(request: FastifyRequest, name = 'page'): number {
  const n = Number(query(request, name))
  return Number.isInteger(n) && n >= 1 && n <= 100_000 ? n : 1
}

/** Previous/next links keeping the other query parameters; the page travels in `name`. */
export function pager(path: string, params: Record<string, string>, page: PageMeta, name = 'page'): { prev: string | null; next: string | null; label: string } {
  const link = (n: number) => `${path}?${new URLSearchParams({ ...Object.fromEntries(Object.entries(params).filter(([, v]) => v !== '')), [name]: String(n) })}`
  const total = page.total_items_exact ? String(page.total_items) : `more than ${page.total_items.toLocaleString('en')}`
  // A page past the last (an old link, an edited address): say so, and lead back to the last one.
  if (page.total_items_exact && page.total_items > 0 && page.number > page.total_pages) {
    return { prev: link(page.total_pages), next: null, label: `No items on page ${page.number}: the last page is ${page.total_pages} · ${total} ${page.total_items === 1 ? 'item' : 'items'}` }
  }
  return {
    prev: page.number > 1 ? link(page.number - 1) : null,
    next: page.number < page.total_pages || (!page.total_items_exact && page.number >= page.total_pages) ? link(page.number + 1) : null,
    label: page.total_items === 0 ? 'No items' : `Page ${page.number} of ${page.total_items_exact ? page.total_pages : 'many'} · ${total} ${page.total_items === 1 ? 'item' : 'items'}`,
  }
}

const shortTime = (iso: string) => iso.replace('T', ' ').replace('Z', ' UTC')

/** /console/assets, /console/assets/:id, /console/archived (CONTRACT §15). */
export async function assetPages(app: FastifyInstance): Promise<void> {
  const typesOf = (request: FastifyRequest) => [...request.console!.ctx.metamodel.assetTypes.values()].map((t) => ({ key: t.key, name: t.name }))

  app.get('/assets', async (request, reply) => {
    const ctx = request.console!.ctx
    const name = query(request, 'name').trim()
    const type = query(request, 'type')
    const known = ctx.metamodel.assetTypes.has(type) ? type : ''
    const and: unknown[] = []
    if (name) and.push({ field: 'name', operator: 'contains', value: name })
    if (known) and.push({ field: 'asset_type_key', operator: 'equals', value: known })
    const result = await searchAssets(ctx, { filter: { and }, sort: [{ field: 'name', order: 'asc' }], page: { number: pageNumber(request), size: PAGE_SIZE } })
    const data = {
      title: 'Assets', name, type: known, types: typesOf(request), assets: result.data, shortTime,
      pager: pager('/console/assets', { name, type: known }, result.page),
    }
    // The live search (htmx) swaps only the results.
    if (request.headers['hx-request'] === 'true') return reply.header('vary', 'HX-Request').type('text/html; charset=utf-8').send(renderPartial('assets-results.eta', data))
    return render(request, reply, 'assets.eta', data)
  })

  app.get('/assets/:id', async (request, reply) => {
    const ctx = request.console!.ctx
    const id = (request.params as { id: string }).id
    const asset = await getAsset(ctx, id)
    // Its relationships and its history are paged apart, each by its own parameter.
    const relationshipsPage = pageNumber(request, 'relationships_page')
    const historyPage = pageNumber(request, 'history_page')
    const [withRelationships] = await includeRelationships(ctx, [asset], {
      include: 'relationships,relationships.related_asset', 'relationships_page[size]': 100,
      'relationships_page[number]': relationshipsPage, relationships_sort: 'relationship_type_key',
    })
    const history = await assetHistory(ctx, asset.id, historyPage)
    const type = ctx.metamodel.assetTypes.get(asset.asset_type_key)
    // A url property is a link when it is an http or https address (javascript: and other schemes stay text).
    const properties = (type?.properties ?? []).map((p) => {
      const value = asset.properties[p.key]
      return { name: p.name, key: p.key, value, link: p.type === 'url' && typeof value === 'string' && /^https?:\/\//i.test(value) ? value : null }
    })
    // A table of one page, seen on its first, has no pager; each keeps the other's page.
    const tablePager = (page: PageMeta | undefined, name: string, other: string, otherPage: number) =>
      page && (page.total_pages > 1 || page.number > 1) ? pager(`/console/assets/${asset.id}`, { [other]: otherPage > 1 ? String(otherPage) : '' }, page, name) : null
    return render(request, reply, 'asset.eta', {
      title: asset.name, asset, typeName: type?.name ?? asset.asset_type_key, properties,
      relationships: withRelationships!.relationships ?? [],
      relationshipsPager: tablePager((withRelationships!.relationships_meta as { page: PageMeta } | undefined)?.page, 'relationships_page', 'history_page', historyPage),
      history: history.entries,
      historyPager: tablePager(history.page, 'history_page', 'relationships_page', relationshipsPage),
      shortTime,
    })
  })

  app.get('/archived', async (request, reply) => {
    const ctx = request.console!.ctx
    const name = query(request, 'name').trim()
    const type = query(request, 'type')
    const known = ctx.metamodel.assetTypes.has(type) ? type : ''
    const result = await listArchivedAssets(ctx, { type: known, name, page: { number: pageNumber(request), size: PAGE_SIZE } })
    const canRestore = ctx.auth.permission !== 'Viewer'
    const canDelete = ctx.auth.permission === 'Admin'
    const rows = result.data.map((a) => ({
      ...a,
      restore: canRestore && hasLevel(ctx.auth, a, 'delete'),
      delete: canDelete && hasLevel(ctx.auth, a, 'delete'),
    }))
    return render(request, reply, 'archived.eta', {
      title: 'Archived assets', name, type: known, types: typesOf(request), rows, shortTime,
      pager: pager('/console/archived', { name, type: known }, result.page),
    })
  })

  app.post('/archived/:id/restore', async (request, reply) => {
    const ctx = request.console!.ctx
    const id = (request.params as { id: string }).id
    // Back to the page of the list the restore was made from: a path of it in visible ASCII (a value
    // with a line break would be no header; another path, `..` segments resolved, is no page of this list).
    const given = field(request, 'back')
    const back = /^[\x21-\x7e]*$/.test(given) ? pageOf(given, '/console/archived', '/console/archived') : '/console/archived'
    try {
      const { asset, relationships: n } = await restoreArchivedAsset(ctx, id)
      return redirectWith(app, request, reply, back, { notice: `Restored ${asset.name}${n > 0 ? ` with ${n} relationship${n === 1 ? '' : 's'}` : ''}.` })
    } catch (err) {
      return backWithRefusal(app, request, reply, err, [Errors.UNIQUE_VIOLATION, Errors.VALIDATION_FAILED], back)
    }
  })

  // Asks for the name before a permanent deletion.
  app.get('/archived/:id/delete', async (request, reply) => {
    const ctx = request.console!.ctx
    const id = (request.params as { id: string }).id
    const row = isUuid(id) ? (await selectArchivedAssets(ctx.db, ctx.auth.orgId, [id]))[0] : undefined
    if (!row || !hasLevel(ctx.auth, row, 'view')) throw new AppError(Errors.NOT_FOUND, 'There is no such archived asset.')
    // The form only for who may use it, as the list shows the button (deleteArchivedAsset's rule).
    if (ctx.auth.permission !== 'Admin' || !hasLevel(ctx.auth, row, 'delete')) {
      throw new AppError(Errors.FORBIDDEN, 'Only an Admin or the Owner with delete on the asset can delete it permanently.')
    }
    return render(request, reply, 'delete.eta', { title: `Delete ${row.name} permanently`, asset: row })
  })

  app.post('/archived/:id/delete', async (request, reply) => {
    const ctx = request.console!.ctx
    const id = (request.params as { id: string }).id
    try {
      const { asset, relationships: n } = await deleteArchivedAsset(ctx, id, field(request, 'confirm_name'))
      return redirectWith(app, request, reply, '/console/archived', { notice: `Deleted ${asset.name} permanently${n > 0 ? `, with ${n} relationship${n === 1 ? '' : 's'}` : ''}.` })
    } catch (err) {
      if (err instanceof AppError && err.def === Errors.VALIDATION_FAILED) {
        return redirectWith(app, request, reply, `/console/archived/${id}/delete`, { error: 'The name you typed does not match. Type the asset\'s name exactly to delete it.' })
      }
      throw err
    }
  })
}
