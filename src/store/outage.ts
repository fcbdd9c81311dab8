/**
 * A dependency that may be down (a read replica, the rate-limit Redis): after a failure it is
 * left alone for `backoffMs` (one timeout per back-off, not one per request), and the outage is
 * reported once, by the first failure, until the dependency answers again: later failures, one
 * per back-off, are the same outage (docs/deployment.md, "logged once per outage").
 */
export class Outage {
  private until = 0
  private down = false

  constructor(private readonly backoffMs: number) {}

  /** Whether the dependency may be tried now (not within a back-off). */
  get due(): boolean {
    return Date.now() >= this.until
  }

  /** It answered: a later failure is a new outage. */
  answered(): void {
    this.down = false
  }

  /** It failed: backs off, and tells `report` if this starts an outage. */
  failed(err: unknown, report: (err: unknown) => void): void {
    this.until = Date.now() + this.backoffMs
    if (!this.down) report(err)
    this.down = true
  }
}
