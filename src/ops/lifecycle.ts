/**
 * The state a graceful shutdown needs (CONTRACT §17): `draining` turns new requests away with 503
 * while those in flight finish, and `onShutdown` callbacks (the event relay's last publication,
 * batched writes) run once no request is left, before the store closes.
 */
export class Lifecycle {
  /** Listening but not done starting (kbis serve: the first start's organization and key, the control socket): /readyz says 503. */
  starting = false
  draining = false
  /** Requests begun and not yet answered (nor cut off): what a shutdown past its timeout says it cancels. */
  inFlight = 0
  /** The shutdown timeout passed: the statements still running are being cancelled, their connections closed. */
  cuttingOff = false
  private readonly hooks: (() => Promise<void> | void)[] = []
  private readonly drainHooks: (() => void)[] = []

  /** Calls `fn` when draining begins. */
  onDrain(fn: () => void): void {
    this.drainHooks.push(fn)
  }

  /** SIGTERM: new requests get 503 from now on, and the drain callbacks run. */
  startDraining(): void {
    if (this.draining) return
    this.draining = true
    for (const fn of this.drainHooks.splice(0)) fn()
  }

  onShutdown(fn: () => Promise<void> | void): void {
    this.hooks.push(fn)
  }

  /** Runs every registered callback, in registration order; one that fails does not stop the others. */
  async runShutdownHooks(onError: (err: unknown) => void): Promise<void> {
    for (const fn of this.hooks.splice(0)) {
      try {
        await fn()
      } catch (err) {
        onError(err)
      }
    }
  }
}

/** Seconds a draining server asks clients to wait before they retry (another instance answers by then). */
export const DRAIN_RETRY_AFTER_SECONDS = 5
