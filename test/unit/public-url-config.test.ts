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

  it('read a comma list of origins', () => {
    expect(loadConfig({ KBIS_CORS_ORIGINS: ' https://ui.example.com/, http://localhost:5173 ,' }).corsOrigins).toEqual(['https://ui.example.com', 'http://localhost:5173'])
  })
})
