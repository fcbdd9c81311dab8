/**
 * Where signing in leads: back to the console page the user was on when their session ended or
 * when they followed a link to it (`next`), rather than to the assets every time. Only a page of
 * the console itself: anything else (another site, a scheme-relative `//host`, the API, the
 * sign-in page) leads to the assets, so that a crafted sign-in link cannot send anyone elsewhere.
 */

/** Where a sign-in leads when it has no page to go back to. */
export const AFTER_SIGN_IN = '/console/assets'

const SIGN_IN = '/console/sign-in'
const NOWHERE = new Set([SIGN_IN, '/console/sign-out'])
// Resolved against a base of our own: a `next` that names another origin keeps it.
const BASE = 'http://console.invalid'
const MAX_LENGTH = 2048

/** The console page `next` names (its path and query), or AFTER_SIGN_IN. */
export function returnTo(next: unknown): string {
  if (typeof next !== 'string' || next.length > MAX_LENGTH || !next.startsWith('/console/') || /[\\\s]/.test(next)) return AFTER_SIGN_IN
  let url: URL
  try {
    url = new URL(next, BASE)
  } catch {
    return AFTER_SIGN_IN
  }
  if (url.origin !== BASE || !url.pathname.startsWith('/console/') || NOWHERE.has(url.pathname)) return AFTER_SIGN_IN
  return url.pathname + url.search
}

/**
 * `value` as a path and query when it names the page `path` or a page under it once its dot
 * segments are resolved (`/console/archived/../../api` names the API), else `fallback`.
 */
export function pageOf(value: unknown, path: string, fallback: string): string {
  if (typeof value !== 'string' || value.length > MAX_LENGTH || !value.startsWith(path) || /[\\\s]/.test(value)) return fallback
  let url: URL
  try {
    url = new URL(value, BASE)
  } catch {
    return fallback
  }
  if (url.origin !== BASE || (url.pathname !== path && !url.pathname.startsWith(`${path}/`))) return fallback
  return url.pathname + url.search
}

/** The sign-in page's address that leads back to `page` (a path and query), when that is a console page. */
export function signInFor(page: string | undefined): string {
  const next = returnTo(page)
  return next === AFTER_SIGN_IN ? SIGN_IN : `${SIGN_IN}?next=${encodeURIComponent(next)}`
}

/** The path and query of an absolute URL (a Referer, htmx's HX-Current-URL), or undefined. */
export function pathOf(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined
  try {
    const parsed = new URL(url)
    return parsed.pathname + parsed.search
  } catch {
    return undefined
  }
}
