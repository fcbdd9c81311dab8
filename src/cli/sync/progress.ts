import cliProgress from 'cli-progress'

/** Progress of an import: a bar with items/s and ETA on a terminal, plain lines otherwise. */
export interface Progress {
  update(bytes: number, items: number): void
  chunk(text: string): void
  stop(): void
}

const INTERRUPTED = 'kbis: interrupted: the chunks reported above are written; the one being sent when you pressed Ctrl-C may be too (an --upsert re-run of the file leaves them unchanged)'

/**
 * `totalBytes`: the file's size, which drives the bar and its ETA; null when unknown (standard
 * input). On a terminal, Ctrl-C (SIGINT) gives the terminal back as it was (the bar hides the
 * cursor and turns line wrapping off), says what may be written, and exits 130 (`exit`).
 */
export function createProgress(totalBytes: number | null, stream: NodeJS.WriteStream = process.stderr, exit: (code: number) => void = (code) => process.exit(code)): Progress {
  const started = Date.now()
  const rate = (items: number) => Math.round(items / Math.max(0.001, (Date.now() - started) / 1000))
  if (!stream.isTTY) {
    return {
      update: () => undefined,
      chunk: (text) => stream.write(`${text}\n`),
      stop: () => undefined,
    }
  }
  // The file's bytes drive the bar and its ETA (the row count is unknown until the end).
  const bar = new cliProgress.SingleBar({
    stream,
    format: totalBytes === null ? 'importing | {items} items | {speed} items/s' : 'importing [{bar}] {percentage}% | {items} items | {speed} items/s | ETA {eta_formatted}',
    hideCursor: true,
    etaBuffer: 50,
  }, cliProgress.Presets.shades_classic)
  const total = Math.max(1, totalBytes ?? 1)
  bar.start(total, 0, { items: 0, speed: 0 })
  const interrupted = (): void => {
    bar.stop()
    // cli-progress's stop shows the cursor again; wrapping too, and the next line starts below the bar.
    stream.write(`\x1b[?25h\x1b[?7h\n${INTERRUPTED}\n`)
    exit(130)
  }
  process.once('SIGINT', interrupted)
  return {
    update: (bytes, items) => bar.update(totalBytes === null ? 0 : Math.min(bytes, total), { items, speed: rate(items) }),
    // Above the bar: clear its line, print, and let the next update draw it again.
    chunk: (text) => {
      stream.write(`\r\x1b[K${text}\n`)
      bar.render()
    },
    stop: () => {
      process.removeListener('SIGINT', interrupted)
      bar.stop()
    },
  }
}
