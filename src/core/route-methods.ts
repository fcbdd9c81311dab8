/**
 * The methods each path of the API takes, gathered from its routes as they are added: a request
 * whose path exists but whose method no route takes is told which methods do (its 404 names them,
 * with an `Allow` header), instead of a bare "no route" that reads as if the path did not exist.
 * (The status stays 404 `not_found`, the CONTRACT's envelope for a route that is not there.)
 */
export class RouteMethods {
  private readonly routes: { pattern: RegExp; methods: Set<string> }[] = []
  private readonly byUrl = new Map<string, Set<string>>()

  add(method: string | readonly string[], url: string): void {
    // A wildcard (`*`) would claim every path.
    if (url.includes('*')) return
    let methods = this.byUrl.get(url)
    if (methods === undefined) {
      methods = new Set()
      this.byUrl.set(url, methods)
      this.routes.push({ pattern: patternOf(url), methods })
    }
    for (const m of typeof method === 'string' ? [method] : method) methods.add(m.toUpperCase())
  }

  /** The methods the routes of `path` (no query) take, in alphabetical order; none for a path no route serves. */
  allowed(path: string): string[] {
    const methods = new Set<string>()
    for (const route of this.routes) if (route.pattern.test(path)) for (const m of route.methods) methods.add(m)
    return [...methods].sort()
  }
}

/** A route's URL as a pattern of paths: each `:param` (with or without its own pattern) one segment. */
function patternOf(url: string): RegExp {
  const source = url.split('/').map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')
  return new RegExp(`^${source}/?$`)
}
