import Router from 'find-my-way'

/**
 * The methods each path of the API takes, from its routes as they are added: a request whose path
 * exists but whose method no route takes is told which methods do (its 404 names them, with an
 * `Allow` header), instead of a bare "no route" that reads as if the path did not exist. (The
 * status stays 404 `not_found`, the CONTRACT's envelope for a route that is not there.) The routes
 * are matched by find-my-way, Fastify's own router, with the app's router options: a path takes
 * a method here exactly when the app would route it.
 */
export class RouteMethods {
  private readonly router: Router.Instance<Router.HTTPVersion.V1>
  private readonly methods = new Set<Router.HTTPMethod>()

  constructor(options: Router.Config<Router.HTTPVersion.V1> = {}) {
    this.router = Router(options)
  }

  add(method: string | readonly string[], url: string): void {
    for (const m of typeof method === 'string' ? [method] : method) {
      const verb = m.toUpperCase() as Router.HTTPMethod
      this.router.on(verb, url, () => undefined)
      this.methods.add(verb)
    }
  }

  /** The methods the routes of `path` (no query) take, in alphabetical order; none for a path no route serves. */
  allowed(path: string): string[] {
    return [...this.methods].filter((m) => this.router.find(m, path) !== null).sort()
  }
}
