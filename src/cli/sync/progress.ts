import cliProgress from 'cli-progress'

/** Progress of an import: a bar with items/s and ETA on a terminal, plain lines otherwise. */
export interface Progress {
  update(bytes: number, items: number): void
  chunk(text: string): void
  stop(): void
}

/** `totalBytes`: the file's size, which drives the bar and its ETA; null when unknown (standard input). */
export function createProgress(totalBytes: number | null, stream: NodeJS.WriteStream = process.stderr): Progress {
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
  return {
    update: (bytes, items) => bar.update(totalBytes === null ? 0 : Math.min(bytes, total), { items, speed: rate(items) }),
    // Above the bar: clear its line, print, and let the next update draw it again.
    chunk: (text) => {
      stream.write(`\r\x1b[K${text}\n`)
      bar.render()
    },
    stop: () => bar.stop(),
  }
}
