/**
 * What `kbis serve` prints when a signal stops it (its primary, with --workers): the stop's
 * beginning, with how long requests in flight may still take (KBIS_SHUTDOWN_TIMEOUT), then
 * STOPPED_LINE once it is done, so that an operator reading the output sees a deliberate stop
 * and its end.
 */
export function stoppingLine(signal: NodeJS.Signals, shutdownTimeoutSeconds: number): string {
  return `kbis: ${signal} received; stopping (requests in flight have up to ${shutdownTimeoutSeconds} s to finish)`
}

export const STOPPED_LINE = 'kbis stopped'
