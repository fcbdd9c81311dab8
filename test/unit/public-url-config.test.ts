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
    // Blanks and empty entries are not servers: the client took them for ones and never connected.
    expect(loadConfig({ NATS_URL: 'nats://127.0.0.1:4222, ' }).natsUrl).toBe('nats://127.0.0.1:4222')
    expect(loadConfig({ NATS_URL: ' nats://a:4222 ,, nats://b:4222' }).natsUrl).toBe('nats://a:4222,nats://b:4222')
  })

  it('refuse other values with one line naming the variable', () => {
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(new ConfigError('LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'))
    for (const bad of ['garbage', '10.0.0.0/99', '999.1.1.1', '2130706433', '10', '0x0a.0.0.1', '10/8', 'fe80::1%eth0']) {
      expect(() => loadConfig({ KBIS_TRUSTED_PROXIES: `10.0.0.1,${bad}` }), bad).toThrow(new ConfigError(`KBIS_TRUSTED_PROXIES: a comma-separated list of addresses or CIDRs (10.0.0.1, 10.0.0.0/8, 2001:db8::/32; IPv4 in dotted decimal), got "${bad}"`))
    }
    for (const none of [' ', ',', ' , ']) {
      expect(() => loadConfig({ NATS_URL: none }), none).toThrow(new ConfigError(`NATS_URL: names no server; a comma-separated list of NATS servers such as nats://127.0.0.1:4222, got "${none}"`))
    }
    for (const bad of [':::', 'http://nats.example.com:4222', 'nats://']) {
      expect(() => loadConfig({ NATS_URL: bad }), bad).toThrow(new ConfigError(`NATS_URL: a comma-separated list of NATS servers such as nats://127.0.0.1:4222, got "${bad}"`))
    }
  })
})

describe('REDIS_URL, KBIS_NATS_STREAM and integer settings', () => {
  it('take redis(s) URLs with an optional database number, stream names, plain decimal integers', () => {
    for (const good of ['redis://127.0.0.1:6379', 'redis://:pw@127.0.0.1:6379/2', 'rediss://user:pw@cache.example.com/']) {
      expect(loadConfig({ REDIS_URL: good }).redisUrl, good).toBe(good)
    }
    expect(loadConfig({ KBIS_NATS_STREAM: 'kbis-events_2' }).natsStream).toBe('kbis-events_2')
    expect(loadConfig({}).natsStream).toBe('KBIS_EVENTS')
    expect(loadConfig({ PORT: '019450', KBIS_METRICS_PORT: '0' })).toMatchObject({ port: 19450, metricsPort: 0 })
    expect(loadConfig({ PORT: '' }).port).toBe(8080)
  })

  it('refuse other values with one line naming the variable, never echoing a Redis URL', () => {
    const redis = 'REDIS_URL: must be a Redis URL such as redis://:password@host:6379/0'
    expect(() => loadConfig({ REDIS_URL: 'garbage' })).toThrow(new ConfigError(`${redis} (the value set is not a URL)`))
    expect(() => loadConfig({ REDIS_URL: 'redis://:secret@[bad' })).toThrow(new ConfigError(`${redis} (the value set is not a URL)`))
    expect(() => loadConfig({ REDIS_URL: 'http://127.0.0.1:6379' })).toThrow(new ConfigError(`${redis}, not a http:// URL`))
    expect(() => loadConfig({ REDIS_URL: 'redis://:secret@127.0.0.1:6379/abc' })).toThrow(new ConfigError(`${redis}: the path is a database number`))
    for (const bad of ['bad name', 'kbis.events', 'a*', 'a>', 'a/b', 'a\\b', 'tab\there', 'x'.repeat(256)]) {
      expect(() => loadConfig({ KBIS_NATS_STREAM: bad }), bad).toThrow(new ConfigError(`KBIS_NATS_STREAM: must be a JetStream stream name of at most 255 characters, without whitespace, ".", "*", ">", "/" or "\\", got "${bad}"`))
    }
    for (const bad of [' ', '1e3', '0x4000', '0x4AFE', '-1', '80.0', '65536']) {
      expect(() => loadConfig({ PORT: bad }), bad).toThrow(new ConfigError(`PORT: must be an integer from 0 to 65535, got "${bad}"`))
      expect(() => loadConfig({ KBIS_METRICS_PORT: bad }), bad).toThrow(new ConfigError(`KBIS_METRICS_PORT: must be an integer from 0 to 65535, got "${bad}"`))
    }
    expect(() => loadConfig({ PORT: '9000', KBIS_METRICS_PORT: '9000' })).toThrow(new ConfigError('KBIS_METRICS_PORT (or --metrics-port): 9000 is the API\'s port (PORT or --port); metrics need a port of their own'))
    expect(() => loadConfig({ KBIS_METRICS_PORT: '9000' }, { port: 9000 })).toThrow(ConfigError)
    expect(loadConfig({ PORT: '0', KBIS_METRICS_PORT: '0' })).toMatchObject({ port: 0, metricsPort: 0 })
    expect(() => loadConfig({ KBIS_POOL_SIZE: '1e1' })).toThrow(new ConfigError('KBIS_POOL_SIZE: must be an integer from 1 to 1000, got "1e1"'))
    for (const bad of ['0x14', '1e3', '5.5', '+5', '5,,10', '-1', '604801', 'abc']) {
      expect(() => loadConfig({ KBIS_WEBHOOK_RETRY_SCHEDULE: bad }), bad).toThrow(new ConfigError(`KBIS_WEBHOOK_RETRY_SCHEDULE: a comma-separated list of seconds (0 to 604800), got "${bad}"`))
    }
    expect(loadConfig({ KBIS_WEBHOOK_RETRY_SCHEDULE: '0, 20 ,604800' }).webhookRetrySchedule).toEqual([0, 20, 604800])
    expect(loadConfig({ KBIS_WEBHOOK_RETRY_SCHEDULE: ' ' }).webhookRetrySchedule).toEqual([])
  })
})
