import { readFileSync } from 'node:fs'
import { fencedStore } from '../metamodel/fence.js'
import { WRITE_METHODS } from '../core/writes.js'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import cookie from '@fastify/cookie'
import formbody from '@fastify/formbody'
import csrf from '@fastify/csrf-protection'
import fastifyHelmet from '@fastify/helmet'
import helmet, { type HelmetOptions } from 'helmet'
import view from '@fastify/view'
import { Eta } from 'eta'
import { AppError, Errors, type ErrorDef } from '../core/errors.js'
import { ESCAPE_RULE, refuseBrokenUrl } from '../core/http-input.js'
import type { RequestContext } from '../request/context.js'
import { userAuthContext } from '../core/auth/user.js'
import { loadSession, parseSessionCookie, signIn, signOut } from './auth.js'
import { AFTER_SIGN_IN, pathOf, returnTo, signInFor } from './return-to.js'
import { deleteSession, purgeIdleSessions, setFlash, type Flash, type TypedForm } from './sql.js'
import { openAnswer, sealAnswer } from '../idempotency/seal.js'
import { assetPages } from './pages.js'
import { settingsPages } from './settings.js'
import { requestStore } from '../core/cut-off.js'

/*
 * The console (CONTRACT §15): server-rendered pages (Eta templates through @fastify/view), plain
 * HTML forms that work without JavaScript, htmx for the live asset search. Its own session auth
 * (cookie `kbis_console`, sessions in the database), never an API key; CSRF on every
 * state-changing request (@fastify/csrf-protection: a secret in an HttpOnly cookie, the token in
 * the form field `_csrf` or, for htmx, the `x-csrf-token` header). docs/console.md.
 */

export const SESSION_COOKIE = 'kbis_console'

declare module 'fastify' {
  interface FastifyRequest {
    console: ConsoleRequest | null
  }
}

export interface ConsoleRequest {
  sessionId: string
  orgId: string
  ctx: RequestContext
  user: { id: string; email: string; name: string; permission_type: string }
  flash: Flash | null
}

const VIEWS = fileURLToPath(new URL('./views/', import.meta.url))
const STATIC = fileURLToPath(new URL('./static/', import.meta.url))
const require = createRequire(import.meta.url)

/** The template engine; pages render inside layout.eta, htmx partials (`renderPartial`) alone. */
const eta = new Eta({ views: VIEWS, autoEscape: true, cache: true })

export function renderPartial(page: string, data: Record<string, unknown>): string {
  return eta.render(page, data)
}

/**
 * Browser hardening for the console's pages only (the API answers JSON to programs): no framing
 * (clickjacking), scripts, styles and form targets from the console itself, no sniffing, no
 * referrer beyond this origin. HSTS is left to whoever terminates TLS (it binds the whole host
 * for a year), and so is upgrading requests to https (a console on plain http must still load).
 */
const HARDENING = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      defaultSrc: ["'self'"],
      baseUri: ["'none'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
      objectSrc: ["'none'"],
      imgSrc: ["'self'", 'data:'],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'"],
    },
  },
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'same-origin' },
  strictTransportSecurity: false,
} satisfies HelmetOptions
const hardenAnswer = helmet(HARDENING)

/**
 * What the router refuses in a console URL before any of the console's routes or hooks run (an
 * escape in the path that is not UTF-8, a segment past the longest id): the console's error page,
 * with its hardening, no session and no form token.
 */
export function answerConsoleRouterError(error: { code?: string }, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const [status, title, message]: [number, string, string] = error.code === 'FST_ERR_MAX_PARAM_LENGTH'
    ? [404, 'Not found', 'There is no such page.']
    : [400, 'Error', error.code === 'FST_ERR_BAD_URL' ? `This address is malformed: ${ESCAPE_RULE}.` : 'This request is malformed.']
  hardenAnswer(request.raw, reply.raw, () => undefined)
  const page = eta.render('layout.eta', { title, body: eta.render('error.eta', { title, message }), user: null, orgKey: null, flash: null, csrfToken: '', path: '', url: '' })
  return reply.code(status).header('cache-control', 'no-store').header('x-request-id', request.id).type('text/html; charset=utf-8').send(page)
}

/** The few files the pages load, read once: no build step, htmx straight from node_modules. */
function staticFiles(): Map<string, { type: string; body: Buffer }> {
  return new Map([
    ['console.css', { type: 'text/css; charset=utf-8', body: readFileSync(STATIC + 'console.css') }],
    ['console.js', { type: 'text/javascript; charset=utf-8', body: readFileSync(STATIC + 'console.js') }],
    ['htmx.min.js', { type: 'text/javascript; charset=utf-8', body: readFileSync(require.resolve('htmx.org/dist/htmx.min.js')) }],
  ])
}

/** What an error page says: the service's own words, never the framework's or a stack. */
function errorMessage(err: Error & { code?: string }, status: number): string {
  if (status === 403 && err.code?.startsWith('FST_CSRF')) return 'This form has expired or did not come from this console. Go back, reload the page and try again.'
  if (status >= 500) return 'Something went wrong on our side. Try again in a moment.'
  if (err instanceof AppError) return err.message
  // A request no page of the console sends (a body that is not a form, one too large): the
  // framework's own words (about JSON, content types) would mislead whoever reads them here.
  return status === 413 ? 'What was sent is larger than the console accepts.' : 'This request could not be read. Go back, reload the page and try again.'
}

/** Form fields as strings (a repeated field: its last value, or all with `all`). NUL never passes. */
export function field(request: FastifyRequest, name: string): string {
  const value = (request.body as Record<string, unknown> | undefined)?.[name]
  const one = Array.isArray(value) ? value[value.length - 1] : value
  return typeof one === 'string' ? one.replaceAll('\0', '') : ''
}

export function fields(request: FastifyRequest, name: string): string[] {
  const value = (request.body as Record<string, unknown> | undefined)?.[name]
  const list = Array.isArray(value) ? value : value === undefined ? [] : [value]
  return list.filter((v): v is string => typeof v === 'string').map((v) => v.replaceAll('\0', ''))
}

export function query(request: FastifyRequest, name: string): string {
  const value = (request.query as Record<string, unknown>)[name]
  return typeof value === 'string' ? value.replaceAll('\0', '') : ''
}

/**
 * The values of a refused form's fields, to fill it in again beside the error (a flash, so the
 * redirect keeps them for one page). Each value is cut to a bound: the session row holds them.
 */
export function typedForm(request: FastifyRequest, of: string, names: { one?: string[]; many?: string[] }): TypedForm {
  const values: Record<string, string | string[]> = {}
  for (const name of names.one ?? []) values[name] = field(request, name).slice(0, TYPED_VALUE_MAX)
  for (const name of names.many ?? []) values[name] = fields(request, name).slice(0, TYPED_VALUES_MAX).map((v) => v.slice(0, TYPED_VALUE_MAX))
  return { of, values }
}

const TYPED_VALUE_MAX = 10_000
const TYPED_VALUES_MAX = 1_000

/** After a change: a message for the next page, then 303 to it (a reload never repeats the change). */
export async function redirectWith(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, to: string, flash: Flash): Promise<FastifyReply> {
  const c = request.console!
  // A new secret waits in the session row sealed with the session's own token (the cookie; the
  // row keeps only its hash): the database alone does not give it away (CONTRACT §9).
  const stored = flash.secrets
    ? { ...flash, secrets: flash.secrets.map((secret) => ({ ...secret, value: sealAnswer(sessionToken(request), FLASH_SCOPE, secret.value) })) }
    : flash
  await setFlash(app.db, c.orgId, c.sessionId, stored)
  return reply.code(303).header('location', to).send()
}

/**
 * A refusal the user can mend (one of `mendable`) goes back to the page `back` with its message,
 * and with what was typed into the form when `form` is given; any other error is the error page's.
 */
export async function backWithRefusal(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, err: unknown,
  mendable: readonly ErrorDef[], back: string, form?: TypedForm): Promise<FastifyReply> {
  if (!(err instanceof AppError) || !mendable.includes(err.def)) throw err
  return redirectWith(app, request, reply, back, { error: err.issues.map((i) => i.detail).join(' '), ...(form ? { form } : {}) })
}

const FLASH_SCOPE = 'kbis console flash'
const sessionToken = (request: FastifyRequest): string => request.cookies[SESSION_COOKIE] ?? ''

/** A flash as stored, its secrets opened with the session's token (those that cannot be are left out). */
function openFlash(request: FastifyRequest, flash: Flash | null): Flash | null {
  if (!flash?.secrets) return flash
  const secrets = flash.secrets.flatMap((secret) => {
    const value = openAnswer(sessionToken(request), FLASH_SCOPE, secret.value)
    return value === null ? [] : [{ ...secret, value }]
  })
  return { ...flash, secrets }
}

/** Renders a page inside the layout with what every page needs (user, CSRF token, flash). */
export async function render(request: FastifyRequest, reply: FastifyReply, page: string, data: Record<string, unknown>, status = 200): Promise<FastifyReply> {
  // A request refused before the cookies were read (a NUL or a broken escape in its URL, refused
  // by the app's first hook) gets its error page without a form token: it has no session either.
  const csrfToken = request.cookies ? reply.generateCsrf({ userInfo: csrfBinding(request) }) : ''
  return reply.code(status).header('cache-control', 'no-store').view(page, {
    ...data,
    user: request.console?.user ?? null,
    orgKey: request.console?.ctx.auth.orgKey ?? null,
    flash: request.console?.flash ?? null,
    csrfToken,
    path: request.url.split('?')[0],
    url: request.url,
  })
}

/** What a form token is bound to: the session id of the request's cookie (a token with none, the sign-in form's, is bound to no session). */
function csrfBinding(request: FastifyRequest): string {
  return parseSessionCookie(request.cookies?.[SESSION_COOKIE])?.id ?? 'no session'
}

/**
 * Whether the console's cookies are `Secure`: the request came over https (directly or through a
 * trusted proxy), or the operator said the service is reached over https (`KBIS_PUBLIC_URL`), as it
 * is behind a proxy not listed in KBIS_TRUSTED_PROXIES.
 */
function isHttps(request: FastifyRequest, publicUrl: string | undefined): boolean {
  return request.protocol === 'https' || servedOverHttps(publicUrl)
}

function servedOverHttps(publicUrl: string | undefined): boolean {
  return publicUrl?.startsWith('https:') === true
}

export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  // HTML pages, not part of the API: kept out of the OpenAPI documents.
  app.addHook('onRoute', (route) => {
    route.schema = { ...(route.schema ?? {}), hide: true }
  })
  const files = staticFiles()
  const idleMinutes = app.config.consoleIdleMinutes
  await registerBrowserPlugins(app)
  app.decorateRequest('console', null)

  // Idle sessions of every organization go now and then (each request also checks its own).
  const purge = setInterval(() => void purgeIdleSessions(app.db, idleMinutes * 60).catch(() => undefined), 10 * 60_000)
  purge.unref()
  app.addHook('onClose', async () => clearInterval(purge))

  // Every state-changing request carries the CSRF token (a form field or the x-csrf-token header):
  // signing in, and every page's form once its session is known to be live (a form sent after the
  // session ended goes to sign-in, with or without its token, as a page asked for then does).
  const checkCsrf = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (request.method === 'GET' || request.method === 'HEAD') return
    await new Promise<void>((resolve, reject) => app.csrfProtection(request, reply, (err?: unknown) => (err ? reject(err) : resolve())))
  }

  app.setErrorHandler(async (err: Error & { statusCode?: number; code?: string }, request, reply) => {
    const status = err instanceof AppError ? err.status : err.code?.startsWith('FST_CSRF') ? 403 : (err.statusCode ?? 500)
    if (status >= 500) request.log.error({ err }, 'console error')
    const message = errorMessage(err, status)
    return render(request, reply, 'error.eta', { title: status === 403 ? 'Not allowed' : status === 404 ? 'Not found' : 'Error', message, status }, status)
  })
  app.setNotFoundHandler(async (request, reply) => render(request, reply, 'error.eta', { title: 'Not found', message: 'There is no such page.', status: 404 }, 404))

  app.get('/static/:file', async (request, reply) => {
    const file = files.get((request.params as { file: string }).file)
    // An unknown file gets the console's 404 page, as any unknown console path.
    if (!file) return reply.callNotFound()
    return reply.type(file.type).header('cache-control', 'public, max-age=300').send(file.body)
  })

  // `next`: the console page to go back to once signed in (return-to.ts), carried by the form.
  const nextField = (next: string): string | null => (next === AFTER_SIGN_IN ? null : next)
  app.get('/sign-in', async (request, reply) =>
    render(request, reply, 'sign-in.eta', { title: 'Sign in', email: '', failed: false, organizations: null, next: nextField(returnTo(query(request, 'next'))) }))

  app.post('/sign-in', { preHandler: checkCsrf }, async (request, reply) => {
    const email = field(request, 'email')
    const next = returnTo(field(request, 'next'))
    const result = await signIn(app.db, { email, password: field(request, 'password'), organization: field(request, 'organization'), address: request.ip })
    if (!result.ok) {
      return render(request, reply, 'sign-in.eta', { title: 'Sign in', email, failed: !result.chooseOrganization, organizations: result.chooseOrganization ?? null, next: nextField(next) },
        result.chooseOrganization ? 200 : 401)
    }
    reply.setCookie(SESSION_COOKIE, result.token, { path: '/console', httpOnly: true, sameSite: 'lax', secure: isHttps(request, app.config.publicUrl) })
    return reply.code(303).header('location', next).send()
  })

  // Every other page needs a live session.
  await app.register(async (pages) => {
    pages.addHook('preHandler', sessionGate(app, idleMinutes))
    pages.addHook('preHandler', checkCsrf)
    pages.get('/', async (_request, reply) => reply.code(303).header('location', '/console/assets').send())
    pages.post('/sign-out', async (request, reply) => {
      await signOut(app.db, request.cookies[SESSION_COOKIE])
      reply.clearCookie(SESSION_COOKIE, { path: '/console' })
      return reply.code(303).header('location', '/console/sign-in').send()
    })
    await pages.register(assetPages)
    await pages.register(settingsPages)
  })
}

/** The plugins the console's pages need: browser hardening, cookies, forms, CSRF, templates. */
async function registerBrowserPlugins(app: FastifyInstance): Promise<void> {
  await app.register(fastifyHelmet, HARDENING)
  // The app's check of broken URLs (a NUL, an escape that is not UTF-8), here so that its error
  // page has the headers above (core/http-input.ts leaves console URLs to this hook).
  app.addHook('onRequest', async (request) => refuseBrokenUrl(request.url))
  await app.register(cookie)
  await app.register(formbody)
  await app.register(csrf, {
    // A token is made for the session of the page it is on (the sign-in page's for none): a secret
    // and a token that someone able to set cookies for this host made for their own session do not
    // pass with the victim's. The HMAC key needs no secrecy here: a token for another's session
    // needs that session's id, which only its cookie gives.
    getUserInfo: csrfBinding,
    csrfOpts: { hmacKey: 'kbis console forms' },
    cookieKey: 'kbis_console_csrf',
    // Lax, as the session's: a link followed from another site (chat, mail, a wiki) brings it, so
    // the page it opens keeps the secret that the forms of the user's other tabs carry tokens of
    // (with Strict a new secret replaced it, and those forms were refused as expired). A form
    // posted from another site still comes without it, and is refused.
    cookieOpts: { path: '/console', httpOnly: true, sameSite: 'lax', secure: servedOverHttps(app.config.publicUrl) ? true : 'auto' },
  })
  await app.register(view, {
    engine: { eta },
    root: VIEWS,
    layout: 'layout.eta',
    viewExt: 'eta',
    production: true,
  })
}

/** Every page but sign-in needs a live session: the request's user and context, or a redirect to sign in. */
function sessionGate(app: FastifyInstance, idleMinutes: number) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    // A new secret is shown by Developer settings only: other pages leave a flash that holds
    // one where it is (another tab loading first must not make it lost), htmx requests any flash.
    const takes = request.headers['hx-request'] !== undefined ? 'none'
      : request.method === 'GET' && request.url.split('?')[0] === '/console/developer-settings' ? 'all' : 'plain'
    const session = await loadSession(app.db, request.cookies[SESSION_COOKIE], idleMinutes, takes)
    const auth = session ? await userAuthContext(app.db, session.org_id, session.user_id) : null
    if (!session || !auth) {
      // A user disabled, or no longer signing in by password (kbis apply), loses the session for
      // good: enabled again, they sign in again (a cookie someone kept must not come back to life).
      if (session) await deleteSession(app.db, session.org_id, session.id)
      // Only a cookie the browser sent is cleared: a cross-site form sends none (SameSite=Lax), and
      // clearing it would sign the user out of every tab.
      if (request.cookies[SESSION_COOKIE] !== undefined) reply.clearCookie(SESSION_COOKIE, { path: '/console' })
      // Signing in leads back to the page: the one asked for, the one a form or an htmx request
      // came from. htmx follows a redirect itself and would put the sign-in page inside the page
      // it updates: it is told to load the sign-in page instead.
      if (request.headers['hx-request'] !== undefined) return reply.code(401).header('hx-redirect', signInFor(pathOf(request.headers['hx-current-url']))).send()
      const page = request.method === 'GET' ? request.url : pathOf(request.headers.referer)
      return reply.code(303).header('location', signInFor(page)).send()
    }
    const user = (await app.db.query<{ id: string; email: string; name: string; permission_type: string }>(
      'SELECT id, email, name, permission_type FROM users WHERE org_id = $1 AND id = $2', [auth.orgId, auth.userId],
    )).rows[0]!
    const metamodel = await app.metamodels.get(auth.orgId)
    // A form that writes checks in its transactions that the metamodel it was validated against
    // still holds, as an API write does (metamodel/fence.ts): a restore is checked against it.
    const db = !WRITE_METHODS.has(request.method) ? app.db : fencedStore(requestStore(request, app.db), auth.orgId, metamodel.version, () => app.metamodels.invalidate(auth.orgId))
    request.console = {
      sessionId: session.id, orgId: session.org_id, user, flash: openFlash(request, session.flash),
      ctx: { db, auth, metamodel, requestId: request.id },
    }
  }
}

/** A 403 page for a change the user may not make (a forged form, a button never shown). */
export function forbidden(detail: string): AppError {
  return new AppError(Errors.FORBIDDEN, detail)
}
