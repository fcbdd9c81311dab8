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
  /**
   * A 409 idempotency_key_in_use without Retry-After: the first request with this Idempotency-Key
   * wrote its changes and its server stopped before it kept the answer; it is never run again.
   */
  answerLost?: true
}

export class ServerClient {
  readonly base: string
  private readonly key: string
  /** Whether the server has answered once: a connection lost after that is retried. */
  private reached = false

  constructor(flags: ServerFlags, env: NodeJS.ProcessEnv = process.env) {
    const url = flags.url ?? env.KBIS_URL
    const key = flags.key ?? env.KBIS_API_KEY
    if (!url) throw new Error('no server: pass --url or set KBIS_URL (e.g. http://127.0.0.1:8080)')
    if (!key) throw new Error('no API key: pass --key or set KBIS_API_KEY')
    if (!isHttpUrl(url)) {
      // Not echoed: a URL may carry a user and password.
      throw new Error(`${flags.url !== undefined ? '--url' : 'KBIS_URL'} must be the server's http:// or https:// address, without a user, password, query or fragment, e.g. http://127.0.0.1:8080`)
    }
    this.base = url.replace(/\/+$/, '')
    // The key as it is, or pasted with the scheme of its header (`Bearer kbis_…`).
    this.key = key.trim().replace(/^Bearer\s+/i, '')
  }

  /**
   * fetch at `path`; a failure to connect is a {@link ReachError}, which says which server and why
   * ("fetch failed" alone names neither) and whether the cause may pass.
   */
  private async fetch(path: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(`${this.base}${path}`, init)
    } catch (err) {
      throw new ReachError(this.base, err)
    }
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.key}`, ...extra }
  }

  /**
   * One JSON request, retried up to 5 times on 503 and 429 (after Retry-After), and on a refused
   * or dropped connection once the server has answered before; every 2 s for up to 60 s while its
   * Idempotency-Key is in use by a first request still running (the 409 says Retry-After).
   */
  async json(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer> {
    // A chunk whose first try is still running (409 idempotency_key_in_use) is asked again until
    // that try answers, or until its claim, left by a server that died, has gone stale (30 s
    // without its process's heartbeat) and this one runs.
    const inUseUntil = Date.now() + IN_USE_WAIT_MS
    for (let attempt = 1; ; attempt++) {
      let res: Response
      try {
        res = await this.fetch(path, {
          method,
          headers: this.headers({ ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }),
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        })
      } catch (err) {
        // Retried once the server has answered (it may be restarting mid-import); a wrong address
        // fails at once.
        if (attempt >= 5 || !this.reached || !(err as ReachError).passing) throw err
        await sleep(attempt * 1000)
        continue
      }
      this.reached = true
      const text = await res.text()
      if (isInUse(res.status, text)) {
        // Without Retry-After, the first request wrote its changes and lost its answer: asking
        // again would get the same 409 for 24 hours.
        if (res.headers.get('retry-after') === null) return { status: res.status, body: parseAnswer(this.base, res, text), answerLost: true }
        if (Date.now() < inUseUntil) {
          attempt--
          await sleep(IN_USE_RETRY_MS)
          continue
        }
      }
      if ((res.status === 503 || res.status === 429) && attempt < 5) {
        await sleep(Math.min(30, Number(res.headers.get('retry-after')) || attempt) * 1000)
        continue
      }
      return { status: res.status, body: text === '' ? null : parseAnswer(this.base, res, text) }
    }
  }

  /**
   * A streamed GET; the caller reads the body. Retried up to 5 times on 503 and 429 (after
   * Retry-After), as `json` is: nothing of such an answer has been handed on yet.
   */
  async stream(path: string): Promise<Response> {
    for (let attempt = 1; ; attempt++) {
      const res = await this.fetch(path, { headers: this.headers() })
      if ((res.status !== 503 && res.status !== 429) || attempt >= 5) return res
      await res.body?.cancel()
      await sleep(Math.min(30, Number(res.headers.get('retry-after')) || attempt) * 1000)
    }
  }
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text)
    // No user or password: the API key authenticates, and fetch refuses such a URL (whose message repeats it).
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.search === '' && url.hash === '' && url.username === '' && url.password === ''
  } catch {
    return false
  }
}

/** Connection failures that a server restarting or a network hiccup causes, worth a retry. */
const PASSING = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'])

/** "cannot reach <server>: <the cause's message>" from undici's `TypeError: fetch failed`. */
export class ReachError extends Error {
  /** Whether the cause may pass (a refused or dropped connection: a server restarting), not a host that does not exist. */
  readonly passing: boolean

  constructor(base: string, err: unknown) {
    const cause = (err as { cause?: { code?: string; message?: string; errors?: { message?: string }[] } }).cause
    // A host with several addresses fails with an AggregateError whose own message is empty.
    const reason = cause?.message || cause?.errors?.[0]?.message || cause?.code || (err as Error).message
    super(`cannot reach ${base}: ${reason}`)
    this.passing = cause?.code !== undefined && PASSING.has(cause.code)
  }
}

/** The answer's JSON; anything else means `--url` names something other than a kbis server. */
function parseAnswer(base: string, res: Response, text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    const type = res.headers.get('content-type')?.split(';')[0] ?? 'no content type'
    throw new Error(`${base} answered HTTP ${res.status} with ${type}, not the JSON of the kbis API: is it the kbis server's address?`)
  }
}

// The chunk is retried with the same Idempotency-Key: while its first try still runs, wait.
const IN_USE_WAIT_MS = 60_000
const IN_USE_RETRY_MS = 2_000
function isInUse(status: number, text: string): boolean {
  return status === 409 && text.includes('"idempotency_key_in_use"')
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export function errorsOf(body: unknown): ApiError[] {
  const errors = (body as { errors?: unknown } | null)?.errors
  return Array.isArray(errors) ? (errors as ApiError[]) : []
}

/**
 * GET /metamodel/asset-types/{key}: the type, or null when the server has no such type. A 404 that
 * is not the API's "asset type … not found" comes from something else at that address (a --url
 * ending in /api/v1 doubles it: "no route …"; the metrics port: "metrics are at GET /metrics"), and
 * is said so, not taken for an unknown type.
 */
export async function readAssetType<T>(client: ServerClient, key: string): Promise<T | null> {
  const res = await client.json('GET', `/api/v1/metamodel/asset-types/${encodeURIComponent(key)}`)
  const detail = errorsOf(res.body)[0]?.detail ?? `HTTP ${res.status}`
  if (res.status === 200) return (res.body as { data: T }).data
  if (res.status === 404 && detail === `asset type ${key} not found`) return null
  const where = res.status === 404 ? `: is ${client.base} the kbis server's base URL (e.g. http://127.0.0.1:8080)?` : ''
  throw new Error(`cannot read asset type ${key}: ${detail}${where}`)
}
