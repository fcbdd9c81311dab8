import { pino } from 'pino'

/** Where a server's log goes: JSON lines, written in the background (pino's default, made here to be waited on). */
export type LogStream = ReturnType<typeof pino.destination>

/** Standard output (or `fd`), as Fastify's logger would have made it. */
export function logStream(fd = 1): LogStream {
  return pino.destination({ dest: fd, sync: false })
}

/**
 * Resolves once every line given to `stream` so far is written (at most `timeoutMs` later: a
 * reader that stopped reading does not hold a shutdown), so that a line printed next on the same
 * output comes after them. The stream writes in the background and its flush(cb) answers at once
 * while a write is still in flight; an empty write is answered by 'drain' once what it holds
 * before it is out.
 */
export function logWritten(stream: LogStream, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      stream.off('drain', done)
      stream.off('error', done)
      resolve()
    }
    const timer = setTimeout(done, timeoutMs)
    timer.unref()
    stream.once('drain', done)
    stream.once('error', done)
    stream.write('')
  })
}
