import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createProgress } from '../../src/cli/sync/progress.js'

/** A stream that says it is a terminal and keeps what is written to it. */
function terminal(): { stream: NodeJS.WriteStream; text: () => string } {
  let text = ''
  const stream = new Writable({ write(chunk, _encoding, done) { text += String(chunk); done() } }) as unknown as NodeJS.WriteStream
  Object.assign(stream, { isTTY: true, columns: 100, rows: 30, cursorTo: () => true, clearLine: () => true, moveCursor: () => true })
  return { stream, text: () => text }
}

describe('kbis import progress on a terminal', () => {
  it('on Ctrl-C gives the cursor and line wrapping back, ends the bar\'s line, says what may be written and exits 130', () => {
    const { stream, text } = terminal()
    const exits: number[] = []
    const bar = createProgress(1000, stream, (code) => exits.push(code))
    bar.update(500, 1234)
    process.emit('SIGINT')
    expect(exits).toEqual([130])
    const written = text()
    expect(written).toContain('\x1b[?25l')
    const after = written.slice(written.lastIndexOf('\x1b[?25l'))
    expect(after).toContain('\x1b[?25h')
    expect(after).toContain('\x1b[?7h')
    expect(written.endsWith('\nkbis: interrupted: the chunks reported above are written; the one being sent when you pressed Ctrl-C may be too (an --upsert re-run of the file leaves them unchanged)\n')).toBe(true)
  })

  it('stops listening for Ctrl-C once the import is done', () => {
    const { stream } = terminal()
    const before = process.listenerCount('SIGINT')
    const bar = createProgress(null, stream, () => undefined)
    expect(process.listenerCount('SIGINT')).toBe(before + 1)
    bar.stop()
    expect(process.listenerCount('SIGINT')).toBe(before)
  })
})
