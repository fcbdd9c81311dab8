import { describe, expect, it } from 'vitest'
import { isListenHost, loadConfig } from '../../src/core/config.js'

describe('HOST and --host', () => {
  it('take IP addresses and host names', () => {
    for (const host of ['127.0.0.1', '0.0.0.0', '::', '::1', 'fe80::1', 'localhost', 'api.internal', 'kbis-1.example.com', 'api.example.com.', 'a'.repeat(63)]) {
      expect(isListenHost(host), host).toBe(true)
    }
  })

  it('refuse what is neither, when the configuration is read', () => {
    for (const host of ['not_a_host', 'has space', '-lead.example', 'trail-.example', 'a..b', '.', 'a..', '[::1]', 'http://x', 'a'.repeat(64), `${'a.'.repeat(127)}ab`]) {
      expect(isListenHost(host), host).toBe(false)
    }
    expect(() => loadConfig({ HOST: 'not_a_host' })).toThrow('HOST: must be an IP address or a host name (letters, digits, hyphens and dots), got "not_a_host"')
    expect(loadConfig({ HOST: '' }).host).toBe('127.0.0.1')
    expect(loadConfig({ HOST: '::' }).host).toBe('::')
  })
})
