/**
 * The CLI's HTTP side of `kbis import` / `kbis export`: a running server at `--url` / KBIS_URL,
 * authenticated with `--key` / KBIS_API_KEY (CONTRACT §16).
 */
export interface ServerFlags {
  url?: string
  key?: string
}

export interface ApiError {
  status: string
  code: string
  detail: string
  source?: { pointer?: string; parameter?: string }
  meta?: { index?: number; client_ref?: string | null }
}

export interface ApiAnswer {
  status: number
  body: unknown
}

export class ServerClient {
  readonly base: string
  private readonly key: string

  constructor(flags: ServerFlags, env: NodeJS.ProcessEnv = process.env) {
    const url = flags.url ?? env.KBIS_URL
    const key = flags.key ?? env.KBIS_API_KEY
    if (!url) throw new Error('no server: pass --url or set KBIS_URL (e.g. http://127.0.0.1:8080)')
    if (!key) throw new Error('no API key: pass --key or set KBIS_API_KEY')
    this.base = url.replace(/\/+$/, '')
    this.key = key
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.key}`, ...extra }
  }

  /** One JSON request, retried on a lost connection, 503 and 429 (after Retry-After) up to 5 times. */
  async json(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer> {
    for (let attempt = 1; ; attempt++) {
      let res: Response
      try {
        res = await fetch(`${this.base}${path}`, {
          method,
          headers: this.headers({ ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }),
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        })
      } catch (err) {
        if (attempt >= 5) throw new Error(`cannot reach ${this.base}: ${(err as Error).message}`)
        await sleep(attempt * 1000)
        continue
      }
      const text = await res.text()
      if ((res.status === 503 || res.status === 429 || isInUse(res.status, text)) && attempt < 5) {
        await sleep(Math.min(30, Number(res.headers.get('retry-after')) || attempt) * 1000)
        continue
      }
      return { status: res.status, body: text === '' ? null : JSON.parse(text) }
    }
  }

  /** A streamed GET; the caller reads the body. */
  async stream(path: string): Promise<Response> {
    return fetch(`${this.base}${path}`, { headers: this.headers() })
  }
}

// The chunk is retried with the same Idempotency-Key: while its first try still runs, wait.
function isInUse(status: number, text: string): boolean {
  return status === 409 && text.includes('"idempotency_key_in_use"')
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export function errorsOf(body: unknown): ApiError[] {
  const errors = (body as { errors?: unknown } | null)?.errors
  return Array.isArray(errors) ? (errors as ApiError[]) : []
}
