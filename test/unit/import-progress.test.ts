import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createProgress } from '../../src/cli/sync/progress.js'

/** A stream that keeps what is written to it; `tty`: it says it is a terminal. */
function output(tty: boolean): { stream: NodeJS.WriteStream; text: () => string } {
  let text = ''
  const stream = new Writable({ write(chunk, _encoding, done) { text += String(chunk); done() } }) as unknown as NodeJS.WriteStream
  if (tty) Object.assign(stream, { isTTY: true, columns: 100, rows: 30, cursorTo: () => true, clearLine: () => true, moveCursor: () => true })
  return { stream, text: () => text }
}

const IN_FLIGHT = 'kbis: interrupted while lines 10002-20001 were being sent: the server may have written them or not (an --upsert re-run of the file leaves the rows already written unchanged); the chunks reported above are written\n'
const NONE_IN_FLIGHT = 'kbis: interrupted: the chunks reported above are written; nothing else was sent\n'

describe('kbis import progress', () => {
  it('on Ctrl-C at a terminal gives the cursor and line wrapping back, ends the bar\'s line, names the chunk in flight and exits 130', async () => {
    const { stream, text } = output(true)
    const exits: number[] = []
    const bar = createProgress(1000, { stream, exit: (code) => exits.push(code) })
    bar.update(500, 1234)
    bar.sending('lines 10002-20001')
    process.emit('SIGINT')
    await new Promise((resolve) => setImmediate(resolve))
    expect(exits).toEqual([130])
    const written = text()
    expect(written).toContain('\x1b[?25l')
    const after = written.slice(written.lastIndexOf('\x1b[?25l'))
    expect(after).toContain('\x1b[?25h')
    expect(after).toContain('\x1b[?7h')
    expect(written.endsWith(`\n${IN_FLIGHT}`)).toBe(true)
  })

  it('says the same in plain lines when not at a terminal, after the report is written out, and 143 for SIGTERM', async () => {
    const { stream, text } = output(false)
    const exits: number[] = []
    const order: string[] = []
    const bar = createProgress(1000, { stream, exit: (code) => { order.push('exit'); exits.push(code) }, beforeExit: async () => { order.push('report closed') } })
    bar.chunk('lines 2-10001: 10000 rows, 10000 created, 0 updated, 0 unchanged')
    bar.sending('lines 10002-20001')
    process.emit('SIGTERM')
    await new Promise((resolve) => setImmediate(resolve))
    expect(exits).toEqual([143])
    expect(order).toEqual(['report closed', 'exit'])
    expect(text()).toBe(`lines 2-10001: 10000 rows, 10000 created, 0 updated, 0 unchanged\n${IN_FLIGHT}`)
    // Between chunks: nothing in flight.
    const idle = output(false)
    const codes: number[] = []
    const quiet = createProgress(null, { stream: idle.stream, exit: (code) => codes.push(code) })
    quiet.sending('lines 2-10001')
    quiet.sending(null)
    process.emit('SIGINT')
    await new Promise((resolve) => setImmediate(resolve))
    expect([codes, idle.text()]).toEqual([[130], NONE_IN_FLIGHT])
  })

  it('stops listening for Ctrl-C and SIGTERM once the import is done', () => {
    for (const tty of [true, false]) {
      const { stream } = output(tty)
      const before = [process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')]
      const bar = createProgress(null, { stream, exit: () => undefined })
      expect([process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')]).toEqual([before[0]! + 1, before[1]! + 1])
      bar.stop()
      expect([process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')]).toEqual(before)
    }
  })
})
