import { describe, expect, it } from 'vitest'
import { RouteMethods } from '../../../src/core/route-methods.js'

describe('RouteMethods: which methods a path takes', () => {
  const routes = new RouteMethods({ ignoreTrailingSlash: true })
  routes.add('GET', '/api/v1/assets')
  routes.add(['POST', 'head'], '/api/v1/assets')
  routes.add('GET', '/api/v1/assets/:id')
  routes.add('PUT', '/api/v1/assets/:id')
  routes.add('POST', '/api/v1/assets/:id/restore')
  routes.add('GET', '/api/v1/openapi.json')
  routes.add('GET', '/api/v1/docs/static/*')

  it('matches each :param as one segment, sorted and without repeats, a trailing slash or not', () => {
    expect(routes.allowed('/api/v1/assets')).toEqual(['GET', 'HEAD', 'POST'])
    expect(routes.allowed('/api/v1/assets/')).toEqual(['GET', 'HEAD', 'POST'])
    expect(routes.allowed('/api/v1/assets/server:hostname:web-01')).toEqual(['GET', 'PUT'])
    expect(routes.allowed('/api/v1/assets/x/restore')).toEqual(['POST'])
  })

  it('finds nothing for a path no route serves; a wildcard route only what is under it; dots are dots', () => {
    expect(routes.allowed('/api/v1/assets/x/y')).toEqual([])
    expect(routes.allowed('/api/v1/nothing')).toEqual([])
    expect(routes.allowed('/api/v1/openapiXjson')).toEqual([])
    expect(routes.allowed('/api/v1/openapi.json')).toEqual(['GET'])
    expect(routes.allowed('/api/v1/docs/static/index.css')).toEqual(['GET'])
  })
})
