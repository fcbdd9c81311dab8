import { describe, expect, it } from 'vitest'
import { lastLine } from '../../../src/export/sql.js'

/** The keyset bound of an export batch by COPY is read from its last line, whatever the chunking. */
describe('lastLine', () => {
  const text = '{"id":"a"}\n{"id":"bb"}\n{"id":"ccc"}\n'
  const split = (at: number[]) => at.reduce<{ chunks: Buffer[]; from: number }>(
    (acc, to) => ({ chunks: [...acc.chunks, Buffer.from(text.slice(acc.from, to))], from: to }), { chunks: [], from: 0 }).chunks

  it('finds the last line in one chunk, in a line split over chunks, and after a chunk that is only the final newline', () => {
    const cases = [[text.length], [5, text.length], [text.length - 5, text.length], [25, 28, text.length], [text.length - 1, text.length], [11, 23, text.length - 1, text.length], [1, 2, 3, text.length]]
    for (const at of cases) expect(lastLine(split(at)).toString()).toBe('{"id":"ccc"}\n')
  })

  it('answers the only line, and nothing for no chunks', () => {
    expect(lastLine([Buffer.from('{"id":"x"}\n')]).toString()).toBe('{"id":"x"}\n')
    expect(lastLine([Buffer.from('{"id"'), Buffer.from(':"x"}\n')]).toString()).toBe('{"id":"x"}\n')
    expect(lastLine([]).length).toBe(0)
  })
})
