import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, withoutRequestIds, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'

function withAllowlist(ipAllowlist: string[], apiAccess = true): typeof ACME {
  const setup = structuredClone(ACME)
  setup.organization = { ...setup.organization, ip_allowlist: ipAllowlist as never[], api_access: apiAccess }
  return setup
}

const ALLOWLIST = ['10.0.0.0/8', '2001:db8::/32', '198.51.100.7']

async function from(t: TestApp, remoteAddress: string, headers: Record<string, string> = {}) {
  const res = await t.app.inject({
    method: 'GET', url: '/api/v1/assets', remoteAddress, headers: { authorization: `Bearer ${t.adminKey}`, ...headers },
  })
  return { status: res.statusCode, body: withoutRequestIds(JSON.parse(res.body), res.headers['x-request-id']), headers: res.headers }
}

/** The quota's headers (CONTRACT §10: every authenticated answer carries them). */
const quota = (headers: Record<string, unknown>) => ({ limit: headers['ratelimit-limit'], remaining: headers['ratelimit-remaining'], reset: headers['ratelimit-reset'] })
const QUOTA = { limit: expect.stringMatching(/^\d+$/), remaining: expect.stringMatching(/^\d+$/), reset: expect.stringMatching(/^\d+$/) }

const notAllowed = (address: string) => ({
  errors: [{ status: '403', code: 'ip_not_allowed', detail: `the address ${address} is not in the organization's IP allowlist` }],
})

for (const store of STORES) {
  describe(`${store}: IP allowlist and plan`, () => {
    let t: TestApp
    let proxied: TestApp
    beforeAll(async () => {
      t = await createTestApp(store, withAllowlist(ALLOWLIST))
      // A second app on the same store, behind a trusted proxy (Fastify's trustProxy is fixed at build).
      const app = await buildApp({ db: t.store.db, config: loadConfig({}, { trustedProxies: ['192.0.2.0/24'] }) })
      await app.ready()
      proxied = { ...t, app }
    })
    afterAll(async () => {
      await proxied?.app.close()
      await t?.close()
    })

    it('admits addresses inside the IPv4 and IPv6 ranges and the exact addresses', async () => {
      for (const address of ['10.1.2.3', '::ffff:10.9.9.9', '2001:db8:1::5', '198.51.100.7']) {
        expect((await from(t, address)).status, address).toBe(200)
      }
    })

    it('answers 403 ip_not_allowed outside them', async () => {
      for (const address of ['192.0.2.1', '198.51.100.8', '2001:db9::1', '::1']) {
        const res = await from(t, address)
        expect(res.status, address).toBe(403)
        expect(res.body).toEqual(notAllowed(address))
        // A valid key of a known organization: an authenticated answer, counted.
        expect(quota(res.headers), address).toEqual(QUOTA)
      }
      const before = Number((await from(t, '10.1.2.3')).headers['ratelimit-remaining'])
      await from(t, '192.0.2.1')
      expect(Number((await from(t, '10.1.2.3')).headers['ratelimit-remaining'])).toBe(before - 2)
    })

    it('ignores X-Forwarded-For when no proxy is trusted', async () => {
      expect((await from(t, '192.0.2.1', { 'x-forwarded-for': '10.1.1.1' })).body).toEqual(notAllowed('192.0.2.1'))
      expect((await from(t, '10.0.0.5', { 'x-forwarded-for': '192.0.2.1' })).status).toBe(200)
    })

    it('takes the client address from X-Forwarded-For when the peer is a trusted proxy', async () => {
      expect((await from(proxied, '192.0.2.1', { 'x-forwarded-for': '10.1.1.1' })).status).toBe(200)
      expect((await from(proxied, '192.0.2.1', { 'x-forwarded-for': '203.0.113.5' })).body).toEqual(notAllowed('203.0.113.5'))
    })

    it('does not let a client spoof the header through a trusted proxy', async () => {
      // The proxy appends the real client (203.0.113.5) to what the client sent.
      const res = await from(proxied, '192.0.2.1', { 'x-forwarded-for': '10.1.1.1, 203.0.113.5' })
      expect(res.body).toEqual(notAllowed('203.0.113.5'))
    })

    it('does not repeat what a trusted proxy gave as the client address when it is no IP address', async () => {
      expect((await from(proxied, '192.0.2.1', { 'x-forwarded-for': 'garbage<script>' })).body).toEqual({
        errors: [{ status: '403', code: 'ip_not_allowed', detail: 'the client address a trusted proxy gave (not an IP address) is not in the organization\'s IP allowlist' }],
      })
    })

    it('ignores the header from a peer that is not a trusted proxy', async () => {
      expect((await from(proxied, '203.0.113.9', { 'x-forwarded-for': '10.1.1.1' })).body).toEqual(notAllowed('203.0.113.9'))
    })

    it('answers 403 api_access_disabled to every authenticated request when the plan has no API access', async () => {
      await applySetup(t.store.db, withAllowlist([], false) as unknown as SetupFile)
      // The invalidation reaches this process asynchronously on PostgreSQL; do not wait for it.
      t.app.authenticator.invalidate()
      for (const url of ['/api/v1/assets', '/api/v1/roles', '/api/v1/openapi/typed.json']) {
        const res = await t.request('GET', url)
        expect(res.status, url).toBe(403)
        expect(res.body).toEqual({ errors: [{ status: '403', code: 'api_access_disabled', detail: "the organization's plan has no API access" }] })
        expect(quota(res.headers), url).toEqual(QUOTA)
      }
      // So is a path no route serves, with a valid key.
      const unknown = await t.request('GET', '/api/v1/no-such-thing')
      expect(unknown.status).toBe(403)
      expect(quota(unknown.headers)).toEqual(QUOTA)
      expect((await t.request('GET', '/api/v1/openapi/base.json', { key: null })).status).toBe(200)
    })
  })
}
