import { randomUUID } from 'node:crypto'
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { AppError, Errors, errorBody, type ErrorDef } from './errors.js'

/** On a request that sent `Expect: 100-continue` and has not been sent its 100 yet. */
const AWAITS_CONTINUE = Symbol('kbis.awaitsContinue')
type ContinuableRequest = IncomingMessage & { [AWAITS_CONTINUE]?: boolean }

/**
 * Answers Node's HTTP server gives before Fastify sees a request — a header block too large (431),
 * a malformed request line (400), a CONNECT (405), a client too slow (408) — in the CONTRACT's
 * envelope (CONTRACT §1), written raw on the socket, with a request id and `Connection: close`;
 * each also gets its request line and metrics (onLayerAnswer).
 */

/** How much of a body over the limit is read and thrown away so that the client receives the 413 (see {@link discardBody}). */
export const DISCARD_BOUND = 64 * 1024 * 1024
/** How long a body over the limit may take to arrive before the 413 is sent anyway. */
export const DISCARD_TIMEOUT_MS = 30_000

/** The answer of the request before this one on its connection (see registerHttpLayer). */
const PREVIOUS_ANSWER = Symbol('kbis.previousAnswer')

/** A whole HTTP/1.1 response carrying one error in the envelope. */
export function rawErrorResponse(def: ErrorDef, detail: string, requestId: string = randomUUID()): string {
  const body = errorBody(new AppError(def, detail))
  for (const entry of body.errors) entry.meta = { request_id: requestId }
  const json = JSON.stringify(body)
  return [
    `HTTP/1.1 ${def.status} ${STATUS_CODES[def.status] ?? 'Error'}`,
    `Date: ${new Date().toUTCString()}`,
    'Content-Type: application/json; charset=utf-8',
    'Cache-Control: no-store',
    `Content-Length: ${Buffer.byteLength(json)}`,
    `X-Request-Id: ${requestId}`,
    'Connection: close',
    '',
    json,
  ].join('\r\n')
}

/** An answer the HTTP layer gave by itself: no request reached Fastify, so no hook wrote its line. */
export interface LayerAnswer {
  requestId: string
  /** `CONNECT`, or `unknown` (a request line Node could not read: its method is not trusted as a label). */
  method: string
  status: number
}

const layerAnswerListeners = new WeakMap<FastifyInstance, (answer: LayerAnswer) => void>()

/** Calls `fn` for each answer the HTTP layer of `app` gives by itself (ops/http.ts logs and counts them). */
export function onLayerAnswer(app: FastifyInstance, fn: (answer: LayerAnswer) => void): void {
  layerAnswerListeners.set(app, fn)
}

/** Writes the answer, then closes the socket once it is sent (destroyed anyway after a second). */
function answerAndClose(socket: Duplex, response: string): void {
  if (!socket.writable || socket.destroyed) {
    socket.destroy()
    return
  }
  socket.end(response)
  setTimeout(() => socket.destroy(), 1_000).unref()
}

function clientErrorOf(err: NodeJS.ErrnoException): [ErrorDef, string] {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return [Errors.HEADERS_TOO_LARGE, 'the request line and headers are larger than the server accepts (16 KiB)']
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [Errors.REQUEST_TIMEOUT, 'the request did not arrive in time']
    case 'HPE_INVALID_METHOD':
      return [Errors.INVALID_REQUEST, 'the request line is malformed: unknown HTTP method']
    case 'HPE_INVALID_URL':
      return [Errors.INVALID_REQUEST, 'the request line is malformed: the request target is not a valid URL (percent-encode spaces, control characters and bytes outside ASCII)']
    case 'HPE_INVALID_VERSION':
      return [Errors.INVALID_REQUEST, 'the request line is malformed: the HTTP version must be HTTP/1.0 or HTTP/1.1']
    default:
      return [Errors.INVALID_REQUEST, 'the request is not valid HTTP/1.1']
  }
}

/**
 * The answer Node is still writing on this socket to an earlier request of the connection, whole
 * already, if any. An error while a request's own body arrives (a timeout, a broken chunk) is
 * that request's: it is answered at once, as there is no earlier answer to wait for.
 */
function answerInFlight(socket: Duplex): ServerResponse | null {
  const response = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage
  return response && !response.writableFinished && response.req.complete ? response : null
}

/**
 * Fastify's `clientErrorHandler` (Node's server `clientError` event). Bytes that are no request
 * may follow a request on its connection (a body sent without Content-Length, as Node's own
 * `http.request` sends a DELETE's): that request is answered first, then the error, in the order
 * of the connection (RFC 9112 §9.3.2) — written at once, the error took the place of the answer
 * of a request that had run, and the connection closed before it was sent.
 */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  // Bytes after a request that asked to close the connection: not read as a request, nor answered
  // (RFC 9112 §9.6); the connection closes once that request's answer is sent.
  if (err.code === 'HPE_CLOSED_CONNECTION') {
    if (answerInFlight(socket) === null) socket.destroy()
    return
  }
  const [def, detail] = clientErrorOf(err)
  this.log.debug({ err: { code: err.code, message: err.message } }, 'client error answered by the HTTP layer')
  const requestId = randomUUID()
  // An error while a request's body arrives (the client left in its middle, a body timeout, a
  // broken chunk) is that request's: its own line and sample tell of it, with this status, and the
  // layer adds none (a client that left mid-body was two lines and two samples).
  const current = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage
  const owner = current && !current.req.complete ? current : null
  const answer = (): void => {
    answerAndClose(socket, rawErrorResponse(def, detail, requestId))
    if (owner) owner.statusCode = def.status
    else layerAnswerListeners.get(this)?.({ requestId, method: 'unknown', status: def.status })
  }
  const earlier = answerInFlight(socket)
  if (earlier === null) return answer()
  let answered = false
  const once = (): void => {
    if (answered) return
    answered = true
    answer()
  }
  earlier.once('finish', once)
  earlier.once('close', once)
}

/**
 * A CONNECT request (Node hands it to the server's `connect` event, not to Fastify): 405 in the
 * envelope. Requests Node's parser lets through that HTTP/1.1 refuses: an HTTP version other than
 * 1.0 and 1.1 (it reads `HTTP/2.0` and `HTTP/0.9` request lines), and an HTTP/1.1 request without
 * a Host header (RFC 9112 §3.2: 400), which Node would answer with a bare 400 itself
 * (`requireHostHeader`, off in app.ts so that the answer comes here, in the envelope).
 */
export function registerHttpLayer(app: FastifyInstance): void {
  // An Expect other than 100-continue: served as if it were not there (RFC 9110 §10.1.1 lets a
  // server answer 417, which Node would send bare, outside the envelope).
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => app.server.emit('request', request, response))
  // Expect: 100-continue (curl sends it with bodies over 1 MB): the 100 goes out once the request
  // passed its checks (its key, its rate limit: onRequest) and its announced length fits the
  // route's limit; otherwise its final answer comes at once, and the body is never asked for (Node
  // sent the 100 itself, first: a 10 MB body crossed the network to be refused with 413).
  app.server.on('checkContinue', (request: ContinuableRequest, response: ServerResponse) => {
    request[AWAITS_CONTINUE] = true
    // Closed after its answer: one given without asking for the body leaves that body unread, and
    // a client that sends it after all (many do after a second) must not have it read as a request.
    response.shouldKeepAlive = false
    app.server.emit('request', request, response)
  })
  // A callback hook: every request passes here, and nearly all have no 100 to wait for.
  app.addHook('preParsing', (request, reply, payload, done) => {
    const raw = request.raw as ContinuableRequest
    if (!raw[AWAITS_CONTINUE]) return done(null, payload)
    const length = Number(request.headers['content-length'])
    const limit = request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? Infinity
    if (Number.isFinite(length) && length > limit) return done(new AppError(Errors.PAYLOAD_TOO_LARGE, `the body is larger than ${limit} bytes`))
    raw[AWAITS_CONTINUE] = false
    reply.raw.writeContinue()
    done(null, payload)
  })
  app.server.on('connect', (_request: IncomingMessage, socket: Duplex) => {
    const requestId = randomUUID()
    answerAndClose(socket, rawErrorResponse(Errors.METHOD_NOT_ALLOWED, 'CONNECT is not supported: this is an API server, not a proxy', requestId))
    layerAnswerListeners.get(app)?.({ requestId, method: 'CONNECT', status: Errors.METHOD_NOT_ALLOWED.status })
  })
  // Requests pipelined on one connection run one after the other, each once the answer before it
  // is sent (RFC 9112 §9.3.2 allows running them at once only when all are safe: two writes to one
  // asset ran out of order on PostgreSQL); none runs once an answer before it closed the
  // connection (RFC 9112 §9.6: a malformed body's 400 closes it, and writes behind it ran with
  // no answer and no log line). Ordinary clients wait for each answer, and pay one check.
  // A callback hook: every request passes here, and nearly all find the answer before theirs sent.
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket as (Duplex & { [PREVIOUS_ANSWER]?: ServerResponse }) | null
    if (!socket) return done()
    const previous = socket[PREVIOUS_ANSWER]
    socket[PREVIOUS_ANSWER] = reply.raw
    if (previous === undefined) return done()
    const go = (): void => {
      if (!previous.shouldKeepAlive || socket.destroyed || !socket.writable) reply.hijack()
      done()
    }
    if (previous.writableFinished || previous.destroyed) return go()
    const sent = (): void => {
      previous.removeListener('finish', sent)
      previous.removeListener('close', sent)
      go()
    }
    previous.once('finish', sent)
    previous.once('close', sent)
  })
  // Node keeps at most 2,000 header lines by default, and lets through header blocks past its
  // 16 KiB limit when they come as many short lines: every line is kept, and the block measured here.
  app.server.maxHeadersCount = 0
  app.addHook('onRequest', async (request, reply) => {
    const problem = requestLineProblem(request.raw)
    if (problem === null) return
    reply.header('Connection', 'close')
    throw new AppError(problem[0], problem[1])
  })
}

/** The largest request line and header block accepted (Node's own `maxHeaderSize` default). */
export const MAX_HEADER_BYTES = 16 * 1024

/** A Host value: uri-host [ ":" port ] (RFC 9112 §3.2, RFC 3986 §3.2.2); empty is allowed. */
const HOST_VALUE = /^(?:\[(?:[0-9A-Fa-f:.]+|v[0-9A-Fa-f]+\.[\w\-.~!$&'()*+,;=:]+)\]|[\w\-.~!$&'()*+,;=%]*)(?::([0-9]{0,5}))?$/

function validHost(value: string): boolean {
  const match = HOST_VALUE.exec(value)
  // The port, when there is one, is at most 65535 (`a:99999` is no host[:port]).
  return match !== null && (match[1] === undefined || match[1] === '' || Number(match[1]) <= 65535)
}

/**
 * What makes a request that Node's parser let through one HTTP/1.1 refuses, with the error and
 * its detail: an HTTP version other than 1.0 and 1.1; a header block over {@link MAX_HEADER_BYTES};
 * an HTTP/1.1 request without exactly one valid Host (RFC 9112 §3.2: 400); a transfer coding other
 * than chunked (RFC 9112 §6.1: 501 — Node reads `gzip, chunked` as chunked, the body still gzipped).
 */
function requestLineProblem(raw: IncomingMessage): [ErrorDef, string] | null {
  const version = raw.httpVersion
  if (version !== '1.0' && version !== '1.1') return [Errors.INVALID_REQUEST, 'the request line is malformed: the HTTP version must be HTTP/1.0 or HTTP/1.1']
  const lines = raw.rawHeaders
  let bytes = (raw.method?.length ?? 0) + (raw.url?.length ?? 0) + 12
  let hosts = 0
  for (let i = 0; i < lines.length; i += 2) {
    const name = lines[i] as string
    bytes += name.length + (lines[i + 1] as string).length + 4
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++
  }
  if (bytes > MAX_HEADER_BYTES) return [Errors.HEADERS_TOO_LARGE, 'the request line and headers are larger than the server accepts (16 KiB)']
  if (version === '1.1' && hosts === 0) return [Errors.INVALID_REQUEST, 'an HTTP/1.1 request must carry a Host header']
  if (hosts > 1) return [Errors.INVALID_REQUEST, 'a request must carry one Host header, not several']
  if (hosts === 1 && !validHost(raw.headers.host as string)) return [Errors.INVALID_REQUEST, 'the Host header is not a valid host[:port]']
  const coding = raw.headers['transfer-encoding']
  if (coding !== undefined && coding.trim().toLowerCase() !== 'chunked') {
    return [Errors.NOT_IMPLEMENTED, 'the only transfer coding the server reads is chunked (send the body without gzip, deflate or other codings)']
  }
  return null
}

/**
 * Before a 413 is sent, the rest of the body is read and thrown away (up to {@link DISCARD_BOUND}
 * bytes or {@link DISCARD_TIMEOUT_MS}): a server that closes the connection while the client is
 * still sending makes the client's TCP stack drop the answer (a reset), so the client would never
 * see the 413. Past the bound the answer goes out anyway and the connection closes.
 */
export function discardBody(raw: IncomingMessage): Promise<void> {
  // A body never asked for (Expect: 100-continue, no 100 sent) is not waited for.
  if (raw.complete || raw.destroyed || raw.readableEnded || (raw as ContinuableRequest)[AWAITS_CONTINUE]) return Promise.resolve()
  return new Promise((resolve) => {
    let seen = 0
    const finish = () => {
      clearTimeout(timer)
      raw.removeListener('data', onData)
      raw.removeListener('end', finish)
      raw.removeListener('close', finish)
      raw.removeListener('error', finish)
      resolve()
    }
    const onData = (chunk: Buffer) => {
      seen += chunk.length
      if (seen > DISCARD_BOUND) finish()
    }
    const timer = setTimeout(finish, DISCARD_TIMEOUT_MS)
    timer.unref()
    raw.on('data', onData)
    raw.once('end', finish)
    raw.once('close', finish)
    raw.once('error', finish)
    raw.resume()
  })
}
