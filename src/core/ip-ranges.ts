import ipaddr from 'ipaddr.js'

/** IPv4 only in dotted four-part decimal: ipaddr.js also takes legacy forms such as `10` or `0x0a.0.0.1`. */
function isAddress(text: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(text) || (ipaddr.IPv6.isValid(text) && !text.includes('%'))
}

/**
 * A CIDR range (`10.0.0.0/8`, `2001:db8::/32`) or a plain address (`192.0.2.7`, `::1`): an
 * organization's IP allowlist entry, a trusted proxy. `2130706433` or `10` would be read as
 * 127.0.0.1 and 0.0.0.10, which nobody writing them means.
 */
export function isAddressOrRange(text: string): boolean {
  const slash = text.indexOf('/')
  if (slash < 0) return isAddress(text)
  return isAddress(text.slice(0, slash)) && /^\d{1,3}$/.test(text.slice(slash + 1)) && ipaddr.isValidCIDR(text)
}
