import { expect } from 'vitest'
import type { Response } from './app.js'

/**
 * A list answer (with links) and a search answer (without) that each found exactly `record`, as
 * GET by id answers it: same members in the same order, the page envelope, a JSON content type
 * (pages pass on the JSON the store writes, decision 0017).
 */
export function expectOneRecordPages(listed: Response, searched: Response, record: Record<string, unknown>): void {
  for (const page of [listed, searched]) {
    expect(page.status).toBe(200)
    expect(page.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(page.body.data).toEqual([record])
    expect(Object.keys(page.body.data[0])).toEqual(Object.keys(record))
    expect(page.body.meta).toEqual({ page: { number: 1, size: 50, total_items: 1, total_items_exact: true, total_pages: 1 } })
  }
  expect(Object.keys(listed.body)).toEqual(['data', 'meta', 'links'])
  expect(Object.keys(searched.body)).toEqual(['data', 'meta'])
}
