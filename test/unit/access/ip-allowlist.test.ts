import { describe, expect, it } from 'vitest'
import { addressAllowed, parseAllowlist } from '../../../src/core/auth/authenticate.js'

const allowed = (address: string, entries: string[]) => addressAllowed(address, parseAllowlist(entries))

describe('IP allowlist', () => {
  it('allows any address when the list is empty', () => {
    expect(allowed('203.0.113.9', [])).toBe(true)
    expect(allowed('2001:db8::1', [])).toBe(true)
  })

  it('matches IPv4 CIDRs', () => {
    const list = ['10.0.0.0/8', '192.168.1.0/24']
    expect(allowed('10.255.0.1', list)).toBe(true)
    expect(allowed('192.168.1.200', list)).toBe(true)
    expect(allowed('192.168.2.1', list)).toBe(false)
    expect(allowed('11.0.0.1', list)).toBe(false)
  })

  it('matches exact addresses, IPv4 and IPv6', () => {
    expect(allowed('203.0.113.9', ['203.0.113.9'])).toBe(true)
    expect(allowed('203.0.113.10', ['203.0.113.9'])).toBe(false)
    expect(allowed('2001:db8::1', ['2001:0db8:0:0::1'])).toBe(true)
    expect(allowed('2001:db8::2', ['2001:db8::1'])).toBe(false)
    expect(allowed('203.0.113.9', ['203.0.113.9/32'])).toBe(true)
  })

  it('matches IPv6 CIDRs and never mixes families', () => {
    const list = ['2001:db8:abcd::/48']
    expect(allowed('2001:db8:abcd:12::1', list)).toBe(true)
    expect(allowed('2001:db8:abce::1', list)).toBe(false)
    expect(allowed('10.0.0.1', list)).toBe(false)
    expect(allowed('::1', ['127.0.0.0/8'])).toBe(false)
  })

  it('compares IPv4-mapped IPv6 addresses as IPv4, in addresses and in entries', () => {
    expect(allowed('::ffff:10.1.2.3', ['10.0.0.0/8'])).toBe(true)
    expect(allowed('::ffff:11.1.2.3', ['10.0.0.0/8'])).toBe(false)
    expect(allowed('10.1.2.3', ['::ffff:10.0.0.0/104'])).toBe(true)
    expect(allowed('::ffff:10.1.2.3', ['::ffff:10.1.2.3'])).toBe(true)
  })

  it('fails closed: bad entries match nothing and do not empty the list', () => {
    expect(allowed('10.0.0.1', ['not-an-address'])).toBe(false)
    expect(allowed('10.0.0.1', ['not-an-address', '10.0.0.0/8'])).toBe(true)
    expect(allowed('garbage', ['10.0.0.0/8'])).toBe(false)
  })
})
