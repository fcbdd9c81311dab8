import { Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { csvRecords } from '../../../src/cli/sync/rows.js'

/** Each record's first cell and the line it starts on, as `kbis import` numbers them. */
async function starts(text: string, chunkSize = text.length): Promise<string[]> {
  const chunks: string[] = []
  for (let i = 0; i < text.length; i += chunkSize) chunks.push(text.slice(i, i + chunkSize))
  const out: string[] = []
  for await (const { line, record, invalid } of csvRecords(Readable.from(chunks.map((c) => Buffer.from(c))))) out.push(`${line}:${invalid ?? record[0]}`)
  return out
}

describe('kbis import: the line where each CSV record starts', () => {
  it('counts LF, CRLF and CR line breaks once each', async () => {
    expect(await starts('h,v\na,1\nb,2\n')).toEqual(['1:h', '2:a', '3:b'])
    expect(await starts('h,v\r\na,1\r\nb,2\r\n')).toEqual(['1:h', '2:a', '3:b'])
    expect(await starts('h,v\ra,1\rb,2\r')).toEqual(['1:h', '2:a', '3:b'])
    expect(await starts('\ufeffh,v\r\na,1\r\nb,2')).toEqual(['1:h', '2:a', '3:b'])
    // Line breaks of both kinds in one file (the first line's says which one ends a record).
    expect(await starts('h,v\na,1\r\nb,2\nc,3\r\n')).toEqual(['1:h', '2:a', '3:b', '4:c'])
  })

  it('counts a line break inside a quoted cell once, CRLF included, for the records after it too', async () => {
    expect(await starts('h,v\r\n"a\r\nstill a",1\r\nb,2\r\n"c\r\n\r\nstill c",3\r\nd,4\r\n')).toEqual(['1:h', '2:a\r\nstill a', '4:b', '5:c\r\n\r\nstill c', '8:d'])
    expect(await starts('h,v\n"a\nstill a",1\nb,2\n')).toEqual(['1:h', '2:a\nstill a', '4:b'])
    expect(await starts('h,v\r"a\rstill a",1\rb,2\r')).toEqual(['1:h', '2:a\rstill a', '4:b'])
    // A Unix file with a cell pasted from Windows.
    expect(await starts('h,v\n"a\r\nstill a",1\nb,2\n')).toEqual(['1:h', '2:a\r\nstill a', '4:b'])
  })

  it('gives the line where each record ends, past the line breaks of its quoted cells', async () => {
    const spans: string[] = []
    for await (const { line, lastLine } of csvRecords(Readable.from([Buffer.from('h,v\r\n"a\r\nstill a",1\r\n\r\nb,2\r\n"c\r\n\r\nstill c",3')]))) spans.push(`${line}-${lastLine}`)
    expect(spans).toEqual(['1-1', '2-3', '5-5', '6-8'])
  })

  it('counts the empty lines it skips', async () => {
    expect(await starts('\n\nh,v\n\na,1\n\n\nb,2\n')).toEqual(['3:h', '5:a', '8:b'])
    expect(await starts('h,v\r\n\r\na,1\r\n\r\n\r\nb,2\r\n')).toEqual(['1:h', '3:a', '6:b'])
    expect(await starts('h,v\r\n"a\r\n\r\nstill a",1\r\n\r\nb,2\r\n')).toEqual(['1:h', '2:a\r\n\r\nstill a', '6:b'])
  })

  it('numbers the same whatever the chunks the file is read in', async () => {
    const text = 'h,v\r\n"a\r\nstill a",1\r\n\r\nb,2\r\n"c\r\nstill c",3\r\nd,4'
    for (const size of [1, 2, 3, 7]) expect(await starts(text, size), `chunks of ${size}`).toEqual(['1:h', '2:a\r\nstill a', '5:b', '6:c\r\nstill c', '8:d'])
  })

  it('gives a record that is not valid CSV at its place with what is wrong, and reads on from the next line', async () => {
    const closing = 'a quote closes a cell but is followed by "x", not a comma or the end of the line'
    expect(await starts('h,v\na,1\n"q"x,q\nb,2\n')).toEqual(['1:h', '2:a', `3:${closing}`, '4:b'])
    expect(await starts('h,v\r\na,1\r\n"q" ,q\r\nb,2\r\n"c\r\nstill c",3\r\nd,4\r\n')).toEqual(['1:h', '2:a', '3:a quote closes a cell but is followed by " ", not a comma or the end of the line', '4:b', '5:c\r\nstill c', '7:d'])
    // A multi-line cell before the bad quote; several bad quotes in one row are one invalid record; two bad rows in a row are two.
    expect(await starts('h,v\n"q\nmore"x,q\n"a "b" c",1\n"a "b",2\nb,2\n')).toEqual(['1:h', `2:${closing}`, '4:a quote closes a cell but is followed by "b", not a comma or the end of the line',
      '5:a quote closes a cell but is followed by "b", not a comma or the end of the line', '6:b'])
    expect(await starts('h,v\nq"x,q\nb,2\n')).toEqual(['1:h', '2:a quote inside a cell that does not start with one (quote the whole cell and double its quotes: "a ""b"" c")', '3:b'])
    expect(await starts('h,v\na,1\n"open,q\nb,2\n')).toEqual(['1:h', '2:a', '3:a quote opens a cell that is never closed (the file ends inside it)'])
    for (const size of [1, 3]) expect(await starts('h,v\na,1\n"q"x,q\nb,2', size), `chunks of ${size}`).toEqual(['1:h', '2:a', `3:${closing}`, '4:b'])
  })
})
