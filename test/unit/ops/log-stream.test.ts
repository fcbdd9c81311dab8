import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { logStream, logWritten } from '../../../src/ops/log-stream.js'

describe('logWritten', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  /** A log stream onto a new file, and a reader of that file. */
  function onFile(): { stream: ReturnType<typeof logStream>; read(): string; close(): void } {
    const dir = mkdtempSync(path.join(tmpdir(), 'kbis-log-'))
    dirs.push(dir)
    const file = path.join(dir, 'log')
    const fd = openSync(file, 'w')
    const stream = logStream(fd)
    return { stream, read: () => readFileSync(file, 'utf8'), close: () => closeSync(fd) }
  }

  it('resolves once every line written before it is out, though the stream writes them in the background', async () => {
    const { stream, read, close } = onFile()
    const lines = Array.from({ length: 2_000 }, (_, i) => `{"level":30,"msg":"line ${i} ${'x'.repeat(80)}"}\n`)
    for (const line of lines) stream.write(line)
    // Not yet out when written: what waiting is for.
    expect(read().length).toBeLessThan(lines.join('').length)
    await logWritten(stream, 10_000)
    expect(read()).toBe(lines.join(''))
    close()
  })

  it('resolves when nothing is pending, and again after more lines', async () => {
    const { stream, read, close } = onFile()
    await new Promise((resolve) => stream.once('ready', resolve))
    await logWritten(stream, 10_000)
    expect(read()).toBe('')
    stream.write('one\n')
    await logWritten(stream, 10_000)
    expect(read()).toBe('one\n')
    close()
  })

  it('gives up after its time when the stream never answers', async () => {
    const { stream, close } = onFile()
    stream.write = () => true
    const started = Date.now()
    await logWritten(stream, 200)
    expect(Date.now() - started).toBeGreaterThanOrEqual(190)
    close()
  })
})
