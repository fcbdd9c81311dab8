import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/core/config.js'

describe('KBIS_PUBLIC_URL and KBIS_CORS_ORIGINS', () => {
  it('are unset by default: relative links, CORS off', () => {
    const config = loadConfig({})
    expect(config.publicUrl).toBeUndefined()
    expect(config.corsOrigins).toEqual([])
  })

  it('keep a public URL without its trailing slash, its path prefix kept', () => {
    expect(loadConfig({ KBIS_PUBLIC_URL: 'https://inventory.example.com/' }).publicUrl).toBe('https://inventory.example.com')
    expect(loadConfig({ KBIS_PUBLIC_URL: 'http://10.0.0.5:8080/kb/' }).publicUrl).toBe('http://10.0.0.5:8080/kb')
  })

  it('refuse a public URL that is not an absolute http(s) URL without query', () => {
    for (const bad of ['inventory.example.com', 'ftp://x.example', 'https://x.example/?a=1', '/api']) {
      expect(() => loadConfig({ KBIS_PUBLIC_URL: bad }), bad).toThrow(ConfigError)
    }
  })

  it('read a comma list of origins, or *', () => {
    expect(loadConfig({ KBIS_CORS_ORIGINS: ' https://ui.example.com/, http://localhost:5173 ,' }).corsOrigins).toEqual(['https://ui.example.com', 'http://localhost:5173'])
    expect(loadConfig({ KBIS_CORS_ORIGINS: '*' }).corsOrigins).toEqual(['*'])
  })

  it('refuse an origin that is not scheme, host and port, naming the variable', () => {
    for (const bad of ['bad', 'ui.example.com', 'ftp://ui.example.com', 'https://ui.example.com/app', 'https://ui.example.com?x=1']) {
      expect(() => loadConfig({ KBIS_CORS_ORIGINS: bad }), bad).toThrow(new ConfigError(`KBIS_CORS_ORIGINS: a comma-separated list of origins such as https://ui.example.com or http://localhost:5173 (scheme, host and port only), or *, got "${bad}"`))
    }
  })
})

describe('LOG_LEVEL, KBIS_TRUSTED_PROXIES and NATS_URL', () => {
  it('take pino levels, addresses and CIDRs, NATS server lists', () => {
    expect(loadConfig({}).logLevel).toBe('info')
    expect(loadConfig({ LOG_LEVEL: 'warn' }).logLevel).toBe('warn')
    expect(loadConfig({ KBIS_TRUSTED_PROXIES: '10.0.0.1, 10.0.0.0/8,2001:db8::/32,::1,loopback' }).trustedProxies).toEqual(['10.0.0.1', '10.0.0.0/8', '2001:db8::/32', '::1', 'loopback'])
    expect(loadConfig({ NATS_URL: 'nats://127.0.0.1:4222,tls://nats.example.com:4443,10.0.0.2:4222' }).natsUrl).toBe('nats://127.0.0.1:4222,tls://nats.example.com:4443,10.0.0.2:4222')
  })

  it('refuse other values with one line naming the variable', () => {
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(new ConfigError('LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'))
    for (const bad of ['garbage', '10.0.0.0/99', '999.1.1.1']) {
      expect(() => loadConfig({ KBIS_TRUSTED_PROXIES: `10.0.0.1,${bad}` }), bad).toThrow(new ConfigError(`KBIS_TRUSTED_PROXIES: a comma-separated list of addresses or CIDRs (10.0.0.1, 10.0.0.0/8, 2001:db8::/32), got "${bad}"`))
    }
    for (const bad of [':::', 'http://nats.example.com:4222', 'nats://']) {
      expect(() => loadConfig({ NATS_URL: bad }), bad).toThrow(new ConfigError(`NATS_URL: a comma-separated list of NATS servers such as nats://127.0.0.1:4222, got "${bad}"`))
    }
  })
})
