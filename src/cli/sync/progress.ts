import cliProgress from 'cli-progress'

/** Progress of an import: a bar with items/s and ETA on a terminal, plain lines otherwise. */
export interface Progress {
  update(bytes: number, items: number): void
  chunk(text: string): void
  /** The lines of the chunk being sent (`lines 2-10001`), or null once its answer is in. */
  sending(lines: string | null): void
  stop(): void
}

/** What an interrupted import says of what the server holds. */
export function interruptedNote(sending: string | null): string {
  return sending === null
    ? 'kbis: interrupted: the chunks reported above are written; nothing else was sent'
    : `kbis: interrupted while ${sending} were being sent: the server may have written them or not (an --upsert re-run of the file leaves the rows already written unchanged); the chunks reported above are written`
}

/** What an import stopped by a server it can no longer reach says (after `kbis: `). */
export function lostNote(reason: string, sending: string): string {
  return `${reason}, while ${sending} were being sent: the server may have written them or not (an --upsert re-run of the file leaves the rows already written unchanged); the chunks reported above are written, the rest of the file was not sent`
}

export interface ProgressOptions {
  stream?: NodeJS.WriteStream
  exit?: (code: number) => void
  /** Run before the exit of an interrupted import (the --errors report's last rows written out). */
  beforeExit?: () => Promise<void>
}

/**
 * `totalBytes`: the file's size, which drives the bar and its ETA; null when unknown (standard
 * input). Ctrl-C (SIGINT) or SIGTERM says what may be written (the chunk in flight, if any),
 * gives a terminal back as it was (the bar hides the cursor and turns line wrapping off), and
 * exits 130 (143 for SIGTERM).
 */
export function createProgress(totalBytes: number | null, options: ProgressOptions = {}): Progress {
  const stream = options.stream ?? process.stderr
  const exit = options.exit ?? ((code) => process.exit(code))
  const started = Date.now()
  const rate = (items: number) => Math.round(items / Math.max(0.001, (Date.now() - started) / 1000))
  let inFlight: string | null = null
  // The file's bytes drive the bar and its ETA (the row count is unknown until the end).
  const bar = stream.isTTY
    ? new cliProgress.SingleBar({
      stream,
      format: totalBytes === null ? 'importing | {items} items | {speed} items/s' : 'importing [{bar}] {percentage}% | {items} items | {speed} items/s | ETA {eta_formatted}',
      hideCursor: true,
      etaBuffer: 50,
    }, cliProgress.Presets.shades_classic)
    : null
  const total = Math.max(1, totalBytes ?? 1)
  bar?.start(total, 0, { items: 0, speed: 0 })
  const signals = { SIGINT: 130, SIGTERM: 143 } as const
  const listeners = new Map<NodeJS.Signals, () => void>()
  const stopListening = () => {
    for (const [signal, listener] of listeners) process.removeListener(signal, listener)
    listeners.clear()
  }
  for (const [signal, code] of Object.entries(signals) as [NodeJS.Signals, number][]) {
    const listener = (): void => {
      stopListening()
      if (bar) {
        bar.stop()
        // cli-progress's stop shows the cursor again; wrapping too, and the next line starts below the bar.
        stream.write('\x1b[?25h\x1b[?7h\n')
      }
      stream.write(`${interruptedNote(inFlight)}\n`)
      void (options.beforeExit?.() ?? Promise.resolve()).catch(() => undefined).finally(() => exit(code))
    }
    listeners.set(signal, listener)
    process.once(signal, listener)
  }
  return {
    update: (bytes, items) => bar?.update(totalBytes === null ? 0 : Math.min(bytes, total), { items, speed: rate(items) }),
    // Above the bar: clear its line, print, and let the next update draw it again.
    chunk: (text) => {
      if (!bar) return void stream.write(`${text}\n`)
      stream.write(`\r\x1b[K${text}\n`)
      bar.render()
    },
    sending: (lines) => { inFlight = lines },
    stop: () => {
      stopListening()
      bar?.stop()
    },
  }
}
