import dns, { type LookupAddress } from 'node:dns'
import net from 'node:net'
import ipaddr from 'ipaddr.js'
import type { Issue } from '../core/errors.js'

/**
 * The SSRF guard of CONTRACT §14. A webhook URL is checked twice: when it is saved (a literal
 * address, or a hostname that resolves, in a refused range → 422) and at every connection (the
 * sender resolves the hostname itself and checks the address it is about to connect to), so a
 * hostname that later resolves to 127.0.0.1 (DNS rebinding) is refused too.
 *
 * Only global unicast addresses pass: loopback, private (RFC 1918), link-local, unique-local,
 * unspecified (0.0.0.0 reaches the host itself), carrier-grade NAT, multicast, broadcast and
 * reserved ranges are refused, unless the operator sets KBIS_WEBHOOK_ALLOW_PRIVATE=true.
 */

/** The ipaddr.js range of an address the guard refuses (`loopback`, `private`, …), or null. */
export function refusedRange(address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6
  try {
    // process(): an IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address.
    parsed = ipaddr.process(address.replace(/%.*$/, ''))
  } catch {
    return 'invalid'
  }
  const range = parsed.range()
  if (range !== 'unicast') return range
  // IPv6 unicast outside 2000::/3 is unassigned or reserved (`::7f00:1`, the deprecated
  // IPv4-compatible form of 127.0.0.1; fe00::/9): only global unicast passes.
  return parsed.kind() === 'ipv6' && !parsed.match(GLOBAL_UNICAST_V6) ? 'reserved' : null
}

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3')

export class RefusedAddressError extends Error {
  readonly code = 'EWEBHOOKADDRESS'
}

const ONLY_PUBLIC = 'webhooks may only reach public addresses (KBIS_WEBHOOK_ALLOW_PRIVATE=true allows it)'

/** ipaddr.js's range names as a reader knows them; another name is spelt out from its camel case. */
const RANGE_NAMES: Readonly<Record<string, string>> = {
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  carrierGradeNat: 'carrier-grade NAT',
  deprecatedSiteLocal: 'deprecated site-local',
  ipv4Mapped: 'IPv4-mapped',
  rfc6145: 'RFC 6145 translated',
  rfc6052: 'RFC 6052 translation',
  teredo: 'Teredo',
  orchid2: 'ORCHIDv2',
  amt: 'AMT',
  as112v6: 'AS112',
  droneRemoteIdProtocolEntityTags: 'DRIP entity tag',
  discard: 'discard-only',
  segmentRouting: 'segment routing',
}

function rangeName(range: string): string {
  return RANGE_NAMES[range] ?? range.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`)
}

function refusal(host: string, address: string, range: string): string {
  const what = host === address ? `the address ${address}` : `${host} resolves to ${address}, which`
  return `${what} is in a ${rangeName(range)} range; ${ONLY_PUBLIC}`
}

/** Why a URL's literal address is refused, or null (hostnames are checked when resolved). */
export function literalAddressProblem(host: string): string | null {
  if (net.isIP(host) === 0) return null
  const range = refusedRange(host)
  return range ? refusal(host, host, range) : null
}

/** `[::1]` → `::1`: URL.hostname keeps the brackets of an IPv6 literal. */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
}

function lookupAll(host: string, timeoutMs: number): Promise<LookupAddress[] | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), timeoutMs)
    dns.lookup(host, { all: true }, (err, addresses) => {
      clearTimeout(timer)
      resolve(err ? null : addresses)
    })
  })
}

/**
 * Checks a webhook URL on create and update: http(s) only, no refused address. A hostname that
 * does not resolve now is accepted (the receiver may not exist yet); the sender checks again.
 */
export async function webhookUrlIssue(raw: string, allowPrivate: boolean): Promise<Issue | null> {
  const issue = (detail: string): Issue => ({ detail, pointer: '/url' })
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return issue('url must be an absolute http or https URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return issue(`url must use http or https, not ${url.protocol.slice(0, -1)}`)
  if (!WRITTEN_IN_FULL.test(raw)) return issue('url must be written in full, http://host/… or https://host/…, without blanks')
  if (url.username !== '' || url.password !== '') return issue('url must not contain credentials (user:password@)')
  const repaired = repairedPart(raw, url)
  if (repaired !== null) return issue(repaired)
  if (allowPrivate) return null
  const host = hostOf(url)
  const literal = literalAddressProblem(host)
  if (literal) return issue(literal)
  if (net.isIP(host) !== 0) return null
  // `localhost` and names under it are loopback whatever a resolver says (RFC 6761 §6.3): refused
  // without a lookup, which a busy resolver could make wait past its 3 s and so let through.
  if (LOCALHOST_NAME.test(host)) return issue(`${host} is a loopback name (localhost and the names under it); ${ONLY_PUBLIC}`)
  for (const { address } of (await lookupAll(host, 3000)) ?? []) {
    const range = refusedRange(address)
    if (range) return issue(refusal(host, address, range))
  }
  return null
}

const LOCALHOST_NAME = /^(?:.+\.)?localhost\.?$/i

/**
 * The URL as written, not only as the URL parser repairs it: it reads `http:///x`,
 * `https:example.com`, `http:\\x` or ` https://x ` as URLs of some host, but the text stored
 * and shown back is the one sent.
 */
const WRITTEN_IN_FULL = /^https?:\/\/[^/\\?#\s]\S*$/i

/**
 * What the URL parser would read otherwise than it is written, so that deliveries would go to
 * another URL than the one stored and shown back; null when nothing. A backslash before the query
 * is read as `/` (`http://host\x` is sent to `/x`), a percent-encoded host is decoded
 * (`ex%41mple.com` is example.com); a host name with an empty label, or port 0, reaches no one.
 */
function repairedPart(raw: string, url: URL): string | null {
  const beforeQuery = raw.split(/[?#]/, 1)[0]!
  if (beforeQuery.includes('\\')) return 'url must not hold a backslash before its query: a URL parser reads it as / (write / if that is meant)'
  const authority = beforeQuery.slice(beforeQuery.indexOf('//') + 2).split('/', 1)[0]!
  if (authority.includes('%')) return 'the host of url must be written without percent-encoding'
  if (url.port === '0') return 'url must not name port 0: give a port from 1 to 65535, or none for the scheme\'s own'
  if (!url.hostname.startsWith('[') && (url.hostname.startsWith('.') || url.hostname.includes('..'))) return `the host of url, ${url.hostname}, has an empty label`
  return null
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/**
 * A `lookup` for http.request/net.connect that resolves the hostname and refuses to connect to a
 * refused address: the check happens on the very address the socket connects to.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, [])
      if (!allowPrivate) {
        for (const { address } of addresses) {
          const range = refusedRange(address)
          if (range) return callback(new RefusedAddressError(refusal(hostname, address, range)), [])
        }
      }
      if (options.all) return callback(null, addresses)
      const first = addresses[0]
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), [])
      return callback(null, first.address, first.family)
    })
  }
}
