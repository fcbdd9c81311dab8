import { describe, expect, it } from 'vitest'
import { AFTER_SIGN_IN, pathOf, returnTo, signInFor } from '../../../src/console/return-to.js'

describe('console: where signing in leads (return-to.ts)', () => {
  it('goes back to a console page, its query kept', () => {
    expect(returnTo('/console/archived?type=server&name=web')).toBe('/console/archived?type=server&name=web')
    expect(returnTo('/console/assets/01a21f8f-8a31-70d4-8529-9f7dfff8c851?relationships_page=2')).toBe('/console/assets/01a21f8f-8a31-70d4-8529-9f7dfff8c851?relationships_page=2')
    expect(returnTo('/console/developer-settings#webhooks-h')).toBe('/console/developer-settings')
  })

  it('leads anywhere else to the assets: other sites, scheme-relative and backslash tricks, the API, sign-in itself, nothing', () => {
    for (const next of [undefined, '', 'https://evil.example/console/assets', '//evil.example/console/assets', '/\\evil.example/console/',
      '/console/../api/v1/assets', '/api/v1/assets', 'console/assets', '/console/sign-in?next=/console/archived', '/console/sign-out',
      '/console/assets\n', ' /console/assets', `/console/${'a'.repeat(2100)}`, 42]) {
      expect(returnTo(next), String(next)).toBe(AFTER_SIGN_IN)
    }
  })

  it('names the page in the sign-in address unless it is the assets', () => {
    expect(signInFor('/console/archived?name=web%2001')).toBe('/console/sign-in?next=%2Fconsole%2Farchived%3Fname%3Dweb%252001')
    expect(signInFor('/console/assets')).toBe('/console/sign-in')
    expect(signInFor(undefined)).toBe('/console/sign-in')
    expect(signInFor('//evil.example/')).toBe('/console/sign-in')
  })

  it('reads the path and query of an absolute URL', () => {
    expect(pathOf('http://127.0.0.1:8080/console/archived?name=x#top')).toBe('/console/archived?name=x')
    expect([pathOf('not a url'), pathOf(undefined), pathOf(['http://a/b'])]).toEqual([undefined, undefined, undefined])
  })
})
