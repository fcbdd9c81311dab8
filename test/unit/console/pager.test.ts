import { describe, expect, it } from 'vitest'
import { pager } from '../../../src/console/pages.js'

const meta = (number: number, total: number, exact = true) => ({ number, size: 25, total_items: total, total_items_exact: exact, total_pages: Math.ceil(total / 25) })

describe('the console pager', () => {
  it('links the pages before and after, keeping the filters', () => {
    expect(pager('/console/archived', { name: 'web', type: '' }, meta(2, 60))).toEqual({
      prev: '/console/archived?name=web&page=1', next: '/console/archived?name=web&page=3', label: 'Page 2 of 3 · 60 items',
    })
    expect(pager('/console/archived', {}, meta(1, 0))).toEqual({ prev: null, next: null, label: 'No items' })
    expect(pager('/console/assets', {}, meta(400, 10_000, false)).label).toBe('Page 400 of many · more than 10,000 items')
  })

  it('says a page past the last one is empty and leads back to the last one', () => {
    expect(pager('/console/archived', { type: 'server' }, meta(99, 60))).toEqual({
      prev: '/console/archived?type=server&page=3', next: null, label: 'No items on page 99: the last page is 3 · 60 items',
    })
  })
})
