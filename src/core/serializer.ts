import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import { isObject } from './json.js'
import { compileLater } from './compile-later.js'

type Schema = Record<string, unknown>

/**
 * A free-form object: `type: object`, `additionalProperties: true`, no member declared (an asset's
 * `properties`, an event's `data`, a page's meta). fast-json-stringify writes such an object key
 * by key (the key escaped, then JSON.stringify of the value); JSON.stringify of the whole object
 * writes the same text and was an eighth of the CPU time of a list page of 100 assets.
 */
function isFreeForm(schema: Schema): boolean {
  return schema.type === 'object' && schema.additionalProperties === true &&
    !('properties' in schema) && !('patternProperties' in schema) && !('propertyNames' in schema) &&
    !('required' in schema) && !('minProperties' in schema) && !('maxProperties' in schema) &&
    !('$ref' in schema) && !('anyOf' in schema) && !('oneOf' in schema) && !('allOf' in schema) && !('if' in schema)
}

/**
 * The schema as the serializer takes it: every free-form object becomes an empty schema (any
 * value, which fast-json-stringify writes with JSON.stringify). A copy: the route's schema, which
 * the OpenAPI document shows, is left as it is.
 */
export function forSerializer(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(forSerializer)
  if (!isObject(schema)) return schema
  if (isFreeForm(schema)) return 'description' in schema ? { description: schema.description } : {}
  const out: Schema = {}
  for (const [key, value] of Object.entries(schema)) {
    // Values of these keywords are data, not schemas.
    out[key] = key === 'enum' || key === 'const' || key === 'examples' || key === 'default' || key === 'required' ? value : forSerializer(value)
  }
  return out
}

/**
 * Serializers by the shared schemas and options they were built with, then by schema: built, or
 * to be built by the first answer that needs it (one wrapper per schema, whichever routes share it).
 */
const serializers = new Map<string, Map<string, Serialize>>()

type Serialize = (doc: unknown) => string

/**
 * Fastify's serializer factory (fast-json-stringify, as by default) over schemas passed through
 * `forSerializer`: `Fastify({ schemaController: { compilersFactory: { buildSerializer } } })`.
 * Each is built when an answer first needs it, not when its route is registered: building one
 * (fast-json-stringify checks the schema against the JSON Schema meta-schema, then generates and
 * compiles code) for every route and status was a tenth of a server's start, for answers most of
 * which a process never sends (the error envelope under a dozen statuses). compilePending
 * (core/compile-later.ts) builds the rest (the tests check that every route's schema builds). Decision 0030.
 */
export function buildSerializer(externalSchemas?: unknown, options?: object): (route: { schema?: unknown; method: string; url: string; httpStatus: string }) => Serialize {
  const external = isObject(externalSchemas)
    ? Object.fromEntries(Object.entries(externalSchemas).map(([id, s]) => [id, forSerializer(s)]))
    : externalSchemas
  const compile = SerializerSelector()(external, options)
  // One serializer per distinct schema (with the same shared schemas and options): most routes
  // answer the same error envelope under six or more statuses. Kept for the process: a serializer
  // is a pure function of its schema, and processes that build several apps (tests) build each once.
  // Looked up in two steps: the shared schemas' text is long (every event type's), and a key made
  // of it and each route's schema cost more than a tenth of building an app.
  const scope = `${JSON.stringify(external) ?? ''}\n${JSON.stringify(options) ?? ''}`
  let built = serializers.get(scope)
  if (built === undefined) serializers.set(scope, (built = new Map()))
  const inScope = built
  return (route) => {
    // The copy is taken now: what the route registered is what is built.
    const schema = forSerializer(route.schema)
    const key = JSON.stringify(schema)
    let serialize = inScope.get(key)
    if (serialize === undefined) {
      const build = compileLater(`${route.method} ${route.url} (${route.httpStatus})`, () => {
        const built = compile({ ...route, schema })
        // Routes registered from now on get the built one itself.
        inScope.set(key, built)
        return built
      })
      inScope.set(key, (serialize = (doc) => build()(doc)))
    }
    return serialize
  }
}
