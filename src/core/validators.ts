import { Ajv, type ValidateFunction } from 'ajv'
import type { DataValidationCxt } from 'ajv/dist/types/index.js'
import addFormats from 'ajv-formats'
import { itemsWhenShort } from './bounded-lists.js'
import { compileLater } from './compile-later.js'

/**
 * Bodies are validated strictly (no coercion, no silent removal of unknown members); query
 * strings and path parameters arrive as text, so their numbers are coerced. `shared`: body
 * schemas the routes refer to by $id.
 */
function newValidators(shared: readonly object[]): { body: Ajv; query: Ajv } {
  const options = { allErrors: true, strict: false, removeAdditional: false, useDefaults: true } as const
  const body = new Ajv({ ...options, coerceTypes: false })
  const query = new Ajv({ ...options, coerceTypes: true })
  for (const ajv of [body, query]) addFormats.default(ajv)
  for (const schema of shared) body.addSchema(schema)
  return { body, query }
}

type Part = 'body' | 'query'

/** Validators by the shared schemas they were made with. */
const scopes = new Map<string, { shared: readonly object[]; validators: ReturnType<typeof newValidators> | null; byKey: Map<string, ValidateFunction> }>()

/**
 * Fastify's validator compiler, with the body schemas that routes refer to by $id: one Ajv
 * validator per distinct schema and part (body, or the text of a query and path), kept for the
 * process as the serializers are (core/serializer.ts), and compiled when a request first needs
 * it, not when its route is registered. A validator is a pure function of its schema; compiling
 * every route's took a seventh of a server's start (about 0.3 s of CPU on a slow machine), paid by
 * every `kbis serve` and `--workers` process before it could listen, while a request needs the few
 * schemas of its own route (a few ms each, once per process). The schema is taken as text at
 * registration, so what the route registered is what is compiled; compilePending (core/compile-later.ts)
 * compiles the rest (the tests check that every route's schema compiles). Decision 0030.
 */
export function validatorCompiler(sharedBodySchemas: readonly object[]): (route: { schema: object; httpPart?: string; method?: string; url?: string }) => ValidateFunction {
  const scopeKey = JSON.stringify(sharedBodySchemas)
  let scope = scopes.get(scopeKey)
  if (scope === undefined) scopes.set(scopeKey, (scope = { shared: sharedBodySchemas, validators: null, byKey: new Map() }))
  const inScope = scope
  return ({ schema, httpPart, method, url }) => {
    const part: Part = httpPart === 'body' ? 'body' : 'query'
    const key = `${part}\n${JSON.stringify(schema)}`
    let validator = inScope.byKey.get(key)
    if (validator !== undefined) return validator
    const compile = compileLater(`${method ?? ''} ${url ?? ''} (${httpPart ?? 'schema'})`, () => {
      inScope.validators ??= newValidators(inScope.shared)
      const compiled = inScope.validators[part].compile(itemsWhenShort(JSON.parse(key.slice(part.length + 1)) as object))
      // Routes registered from now on get the compiled one itself.
      inScope.byKey.set(key, compiled)
      return compiled
    })
    validator = function (this: unknown, data: unknown, context?: DataValidationCxt): boolean {
      const validate = compile()
      const valid = validate.call(this, data, context)
      validator!.errors = validate.errors
      return valid
    } as ValidateFunction
    // Fastify gives a function with a schemaEnv (an Ajv validator) the request as the parent of the
    // part it validates, so that Ajv may replace a root value it coerces: this one passes it on.
    validator.schemaEnv = true as unknown as ValidateFunction['schemaEnv']
    inScope.byKey.set(key, validator)
    return validator
  }
}
