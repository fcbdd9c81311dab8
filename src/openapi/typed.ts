import type { AssetType, Metamodel } from '../metamodel/types.js'
import { propertyValueSchema } from '../metamodel/validate.js'
import { isObject } from '../core/json.js'

/**
 * The typed OpenAPI description of one organization (CONTRACT §11): the base document (generated
 * from the route schemas) plus what the organization's metamodel knows.
 *
 * - `components.schemas`: per asset type `<Type>` (its `properties` object: names, JSON types,
 *   `enum` for options, `format: date`, required), `<Type>Input` (the same in a create body:
 *   `null` is no value), `<Type>Replace` (the same in a PUT body, but for the unique key the path
 *   gives), `<Type>Patch` (the same for PATCH: nothing required, `null` clears), `<Type>Asset` (the
 *   record), `<Type>AssetCreate`, `<Type>AssetUpdate`;
 *   the unions `Asset`, `AssetCreate` (oneOf, discriminated by `asset_type_key`) and `AssetUpdate`
 *   (anyOf: a PATCH body need not name its type, so it cannot be discriminated); `AssetTypeKey`
 *   and `RelationshipTypeKey` (enums of the keys).
 * - In `paths`, every asset record, create body and patch body (also inside search, bulk and
 *   includes, wherever a route reuses those schemas) is replaced by its typed form, and every
 *   `asset_type_key` / `relationship_type_key` string by the enum.
 *
 * `<Type>` is the asset type key in PascalCase (`server` → `Server`, `business_app` → `BusinessApp`).
 */
export function typedDocument(base: Record<string, unknown>, metamodel: Metamodel, orgKey: string): Record<string, unknown> {
  const doc = structuredClone(base) as OpenApiDoc
  const types = [...metamodel.assetTypes.values()]
  const names = schemaNames(types, new Set(Object.keys(doc.components?.schemas ?? {})))
  const schemas: Record<string, unknown> = {}
  schemas.AssetTypeKey = keyEnum('An asset type key of this organization.', types.map((t) => t.key))
  schemas.RelationshipTypeKey = keyEnum('A relationship type key of this organization.', [...metamodel.relationshipTypes.keys()])
  const canonical = canonicalSchemas(doc)
  const typer = new SchemaTyper(types, names, canonical, [...metamodel.relationshipTypes.keys()])
  for (const type of types) Object.assign(schemas, typer.componentsOf(type))
  if (types.length > 0) Object.assign(schemas, typer.unions())
  doc.paths = typer.rewrite(doc.paths) as Record<string, unknown>
  doc.components = { ...doc.components, schemas: { ...doc.components?.schemas, ...schemas } }
  doc.info = {
    ...doc.info,
    title: `${String(doc.info?.title ?? 'kbis inventory API')} (typed for ${orgKey})`,
    'x-kbis-metamodel-version': metamodel.version,
  }
  return doc
}

interface OpenApiDoc {
  info?: Record<string, unknown>
  paths: Record<string, unknown>
  components?: { schemas?: Record<string, unknown>; [k: string]: unknown }
  [k: string]: unknown
}

type Json = Record<string, unknown>
type Names = Map<string, string>

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` })

function keyEnum(description: string, keys: string[]): Json {
  // An empty enum would accept nothing; with no keys defined the type stays a plain string.
  return keys.length > 0 ? { type: 'string', description, enum: keys } : { type: 'string', description }
}

function pascal(key: string): string {
  return key.split('_').filter(Boolean).map((part) => part[0]!.toUpperCase() + part.slice(1)).join('')
}

const RESERVED = ['Asset', 'AssetCreate', 'AssetUpdate', 'AssetTypeKey', 'RelationshipTypeKey']
const SUFFIXES = ['', 'Input', 'Replace', 'Patch', 'Asset', 'AssetCreate', 'AssetUpdate']

/** Component base names per asset type, never colliding with each other or with the base document. */
function schemaNames(types: AssetType[], existing: Set<string>): Names {
  const taken = new Set([...existing, ...RESERVED])
  const names: Names = new Map()
  for (const type of types) {
    let name = pascal(type.key)
    for (let n = 2; SUFFIXES.some((s) => taken.has(name + s)); n++) name = `${pascal(type.key)}${n}`
    for (const s of SUFFIXES) taken.add(name + s)
    names.set(type.key, name)
  }
  return names
}

/** The untyped record and bodies as the base document renders them, found at their own routes. */
function canonicalSchemas(doc: OpenApiDoc): { record?: string; create?: string; update?: string } {
  const op = (path: string, method: string): Json | undefined => (doc.paths[path] as Json | undefined)?.[method] as Json | undefined
  const body = (o: Json | undefined) => (o?.requestBody as Json | undefined)?.content as Json | undefined
  const json = (content: Json | undefined) => (content?.['application/json'] as Json | undefined)?.schema as Json | undefined
  const get = op('/api/v1/assets/{id}', 'get')
  const ok = (get?.responses as Json | undefined)?.['200'] as Json | undefined
  const record = (json(ok?.content as Json | undefined)?.properties as Json | undefined)?.data as Json | undefined
  const create = json(body(op('/api/v1/assets', 'post')))
  const update = json(body(op('/api/v1/assets/{id}', 'patch')))
  return { record: stable(record), create: stable(create), update: stable(update) }
}

function stable(value: unknown): string | undefined {
  return value === undefined ? undefined : JSON.stringify(value)
}

type Shape = 'record' | 'create' | 'replace' | 'update' | null

/** Which asset schema an object schema is, by its members (routes spread and extend them). */
function shapeOf(schema: Json): Shape {
  const props = schema.properties
  if (schema.type !== 'object' || !isObject(props) || !isObject(props.properties)) return null
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : []
  if ('id' in props && 'asset_type_key' in props && 'created_at' in props && 'access_domain_key' in props) return 'record'
  if ('created_at' in props || !('name' in props) || !('access_domain_key' in props)) return null
  if ('asset_type_key' in props && required.includes('asset_type_key')) return 'create'
  // A PUT body (upsert by composite key): the type comes from the key, the name is required.
  if ('asset_type_key' in props && required.includes('name')) return 'replace'
  return required.includes('asset_type_key') ? null : 'update'
}

class SchemaTyper {
  constructor(
    private readonly types: AssetType[],
    private readonly names: Names,
    private readonly canonical: { record?: string; create?: string; update?: string },
    private readonly relationshipTypeKeys: readonly string[],
  ) {}

  /** The five components of one asset type. */
  componentsOf(type: AssetType): Json {
    const n = this.names.get(type.key)!
    // The record's properties; `input`: a create body's (null is no value, as a property left
    // out); `patch`: a PATCH body's (null clears, nothing required).
    // `replace`: a PUT body's, as `input` but nothing required: with ?merge=true an existing asset
    // keeps what is left out, as on PATCH, and a schema cannot depend on the query (the server
    // checks the required properties of a replacement; its description says which).
    const required = (shape: 'record' | 'input' | 'replace' | 'patch'): string[] => shape === 'patch' || shape === 'replace' ? []
      : type.properties.filter((p) => p.required).map((p) => p.key)
    const requiredOfReplace = type.properties.filter((p) => p.required && p.key !== type.unique_property_key).map((p) => p.key)
    const properties = (shape: 'record' | 'input' | 'replace' | 'patch'): Json => ({
      type: 'object',
      title: `${type.name} properties${shape === 'patch' ? ' (PATCH)' : shape === 'input' ? ' (create)' : shape === 'replace' ? ' (PUT)' : ''}`,
      ...(shape === 'replace'
        ? { description: `${type.description ? `${type.description} ` : ''}A replacement: properties left out are cleared${requiredOfReplace.length > 0 ? `, and ${requiredOfReplace.join(', ')} must be given (422 otherwise)` : ''}; with ?merge=true an existing asset keeps them, as on PATCH, and none is required.` }
        : type.description ? { description: type.description } : {}),
      'x-kbis-asset-type-key': type.key,
      properties: Object.fromEntries(type.properties.map((p) => {
        // A currency's code has no JSON Schema keyword: said in words (when the property has no
        // description of its own) and as an extension a generator can read.
        const currency = p.type === 'currency' && p.currency ? { 'x-kbis-currency': p.currency } : {}
        const description = p.description ?? (p.type === 'currency' && p.currency ? `An amount in ${p.currency}` : null)
        const value = { ...(p.name !== p.key ? { title: p.name } : {}), ...(description ? { description } : {}), ...propertyValueSchema(p), ...currency }
        // On PATCH a property set to null is cleared (CONTRACT §2), on create it is not set; a
        // required one must have a value.
        return [p.key, shape !== 'record' && !p.required ? { anyOf: [value, { type: 'null' }] } : value]
      })),
      ...(required(shape).length > 0 ? { required: required(shape) } : {}),
      additionalProperties: false,
    })
    const base = (shape: 'record' | 'create' | 'update'): Json | undefined => {
      const text = this.canonical[shape]
      return text === undefined ? undefined : (JSON.parse(text) as Json)
    }
    const out: Json = { [n]: properties('record'), [`${n}Input`]: properties('input'), [`${n}Replace`]: properties('replace'), [`${n}Patch`]: properties('patch') }
    for (const shape of ['record', 'create', 'update'] as const) {
      const schema = base(shape)
      if (schema) out[`${n}${shape === 'record' ? 'Asset' : shape === 'create' ? 'AssetCreate' : 'AssetUpdate'}`] = this.branch(schema, shape, type)
    }
    return out
  }

  unions(): Json {
    const refs = (suffix: string) => this.types.map((t) => ref(`${this.names.get(t.key)}${suffix}`))
    const mapping = (suffix: string) =>
      Object.fromEntries(this.types.map((t) => [t.key, `#/components/schemas/${this.names.get(t.key)}${suffix}`]))
    const out: Json = {}
    if (this.canonical.record) out.Asset = { oneOf: refs('Asset'), discriminator: { propertyName: 'asset_type_key', mapping: mapping('Asset') } }
    if (this.canonical.create) {
      out.AssetCreate = { oneOf: refs('AssetCreate'), discriminator: { propertyName: 'asset_type_key', mapping: mapping('AssetCreate') } }
    }
    if (this.canonical.update) out.AssetUpdate = { anyOf: refs('AssetUpdate') }
    return out
  }

  /** One asset type's variant of an untyped record or body. */
  private branch(schema: Json, shape: 'record' | 'create' | 'replace' | 'update', type: AssetType): Json {
    const n = this.names.get(type.key)!
    const props = { ...(schema.properties as Json) }
    props.properties = ref(shape === 'update' ? `${n}Patch` : shape === 'create' ? `${n}Input` : shape === 'replace' ? `${n}Replace` : n)
    if ('asset_type_key' in props) props.asset_type_key = { type: 'string', const: type.key }
    const required = Array.isArray(schema.required) ? [...(schema.required as string[])] : []
    // A type with required properties cannot be created without a `properties` object.
    if (shape === 'create' && type.properties.some((p) => p.required) && !required.includes('properties')) required.push('properties')
    return { ...this.rewriteMembers(schema), properties: this.rewriteMembers(props), ...(required.length > 0 ? { required } : {}) }
  }

  /** Replaces asset schemas and key strings anywhere below `node`. */
  rewrite(node: unknown): unknown {
    if (Array.isArray(node)) return node.map((item) => this.rewrite(item))
    if (!isObject(node)) return node
    const shape = this.types.length > 0 ? shapeOf(node) : null
    return shape ? this.typed(node, shape) : this.rewriteMembers(node)
  }

  /** Rewrites the members of `node`, not `node` itself. */
  private rewriteMembers(node: Json): Json {
    const out: Json = {}
    for (const [key, value] of Object.entries(node)) {
      out[key] = this.isKeyMember(key, value) ? this.keyRef(key, value as Json) : this.rewrite(value)
      // Embedded relationships are keyed by relationship type: {outgoing: {runs_on: {...}}}.
      const group = out[key]
      if ((key === 'outgoing' || key === 'incoming') && isObject(group) && isObject(group.propertyNames)) {
        out[key] = { ...group, propertyNames: ref('RelationshipTypeKey') }
      }
    }
    if (node.in === 'query' && typeof node.name === 'string' && isObject(node.schema)) {
      // A list filter takes any value (another key matches nothing): the keys are examples, not an enum.
      const member = /^filter\[(asset_type_key|relationship_type_key)\]$/.exec(node.name)?.[1]
      if (member && this.isPlainString(node.schema)) {
        const keys = member === 'asset_type_key' ? this.types.map((t) => t.key) : this.relationshipTypeKeys
        if (keys.length > 0) out.schema = { ...node.schema, examples: keys.slice(0, 20) }
      }
    }
    return out
  }

  private typed(schema: Json, shape: 'record' | 'create' | 'replace' | 'update'): Json {
    if (shape !== 'replace' && stable(schema) === this.canonical[shape]) return ref(shape === 'record' ? 'Asset' : shape === 'create' ? 'AssetCreate' : 'AssetUpdate')
    // A route's own variant (e.g. a bulk item with client_ref, a PUT body): typed inline, same
    // rules. Without a required asset_type_key a body may fit several types' branches: anyOf.
    const branches = this.types.map((t) => this.branch(schema, shape, t))
    return shape === 'update' || shape === 'replace' ? { anyOf: branches } : { oneOf: branches }
  }

  private isPlainString(schema: Json): boolean {
    return schema.type === 'string' && !('enum' in schema) && !('const' in schema) && !('$ref' in schema)
  }

  /** Inside a `properties` map, a member named asset_type_key or relationship_type_key. */
  private isKeyMember(key: string, value: unknown): boolean {
    return (key === 'asset_type_key' || key === 'relationship_type_key') && isObject(value) && this.isPlainString(value)
  }

  private keyRef(member: string, schema: Json): Json {
    const name = member === 'asset_type_key' ? 'AssetTypeKey' : 'RelationshipTypeKey'
    return { ...ref(name), ...(typeof schema.description === 'string' ? { description: schema.description } : {}) }
  }
}
