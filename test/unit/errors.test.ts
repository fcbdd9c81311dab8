import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { Errors } from '../../src/core/errors.js'

describe('error catalogue', () => {
  it('lists every code of src/core/errors.ts in docs/errors.md with its status', () => {
    const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
    const missing = Object.values(Errors).filter((e) => !doc.includes(`| ${e.status} | \`${e.code}\` |`))
    expect(missing).toEqual([])
  })

  it('never gives two entries the same code', () => {
    const codes = Object.values(Errors).map((e) => e.code)
    expect(new Set(codes).size).toBe(codes.length)
  })
})
