import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadSetupFile, parseSetup, SetupError } from '../../../src/setup/load.js'
import { validateSetup } from '../../../src/setup/validate.js'
import { baseSetup, failure } from './helpers.js'

const TYPES = 'text, long_text, rich_text, url, number, integer, percentage, currency, score, date, boolean, select, multi_select, unique_key'

const YAML = `
organization: {key: acme, name: Acme, ip_allowlist: [10.0.0.0/8, 192.0.2.7, "2001:db8::/32", "::1"]}
access_domains: [{key: it, name: IT}]
roles:
  - {key: all, name: Everything, grants: [{access_domain_key: "*", asset_type_keys: ["*"], level: edit_access_domain}]}
users: [{email: owner@acme.test, name: Owner, permission_type: Owner, role_keys: [all]}]
metamodel:
  asset_types:
    - key: server
      properties:
        - {key: hostname, name: Hostname, type: unique_key, required: true}
        - {key: rating, type: score}
        - {key: cost, type: currency, currency: EUR, min: 0}
  relationship_types:
    - {key: runs_on, source_asset_type_keys: [server]}
`

/** What YAML above loads to: every default filled in. */
const LOADED = {
  organization: {
    key: 'acme', name: 'Acme', api_access: true, rate_limit: { requests: 6000, window_seconds: 60 },
    ip_allowlist: ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1'],
  },
  access_domains: [{ key: 'it', name: 'IT', description: null }],
  roles: [{ key: 'all', name: 'Everything', description: null, grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }] }],
  users: [{ email: 'owner@acme.test', name: 'Owner', permission_type: 'Owner', role_keys: ['all'], enabled: true, sign_in_methods: [] }],
  metamodel: {
    asset_types: [{
      key: 'server', name: 'server', description: null,
      properties: [
        { key: 'hostname', name: 'Hostname', description: null, type: 'unique_key', required: true, options: null, currency: null, min: null, max: null },
        { key: 'rating', name: 'rating', description: null, type: 'score', required: false, options: null, currency: null, min: 0, max: 5 },
        { key: 'cost', name: 'cost', description: null, type: 'currency', required: false, options: null, currency: 'EUR', min: 0, max: null },
      ],
    }],
    relationship_types: [{ key: 'runs_on', name: 'runs_on', description: null, source_asset_type_keys: ['server'], target_asset_type_keys: [] }],
  },
}

describe('loadSetupFile', () => {
  let dir: string
  const file = async (name: string, text: string): Promise<string> => {
    const p = path.join(dir, name)
    await writeFile(p, text)
    return p
  }
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kbis-setup-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('loads YAML and fills every default', async () => {
    const p = await file('acme.yaml', YAML)
    expect(await loadSetupFile(p)).toEqual({ source: p, ...LOADED })
  })

  it('loads .yml like .yaml', async () => {
    const p = await file('acme.yml', YAML)
    expect(await loadSetupFile(p)).toEqual({ source: p, ...LOADED })
  })

  it('loads JSON', async () => {
    const p = await file('acme.json', JSON.stringify({ organization: { key: 'acme' } }))
    expect(await loadSetupFile(p)).toEqual({
      source: p,
      organization: { key: 'acme', name: 'acme', api_access: true, rate_limit: { requests: 6000, window_seconds: 60 }, ip_allowlist: [] },
    })
  })

  it('accepts what it produced (a loaded file validates again unchanged)', async () => {
    const p = await file('again.yaml', YAML)
    const { source: _, ...loaded } = await loadSetupFile(p)
    expect(validateSetup(loaded)).toEqual(LOADED)
  })

  it('loads the complete example of docs/configuration.md', async () => {
    const doc = await readFile(new URL('../../../docs/configuration.md', import.meta.url), 'utf8')
    const example = /```yaml\n([\s\S]*?)```/.exec(doc)![1]!
    const setup = parseSetup(example, 'example.yaml', 'yaml')
    expect([setup.organization.key, setup.roles!.length, setup.users!.length, setup.metamodel!.asset_types!.length]).toEqual(['acme', 2, 2, 2])
  })

  it('rejects an unknown extension', async () => {
    expect(await failure(loadSetupFile('acme.txt'))).toBe('SetupError: acme.txt: unsupported file type ".txt" (use .yaml, .yml or .json)')
  })

  it('rejects a missing file', async () => {
    const p = path.join(dir, 'missing.yaml')
    expect(await failure(loadSetupFile(p))).toBe(`SetupError: ${p}: cannot read the file (ENOENT)`)
  })

  it('reports YAML syntax errors with line and column', async () => {
    const p = await file('broken.yaml', 'organization:\n  key: acme\n  key: other\n')
    expect(await failure(loadSetupFile(p))).toBe(`SetupError: ${p}: line 3, column 3: Map keys must be unique`)
  })

  it('reports JSON syntax errors on one line, with the line and column where Node names a position', async () => {
    const p = await file('broken.json', '{"organization": }')
    expect(await failure(loadSetupFile(p))).toBe(`SetupError: ${p}: invalid JSON: Unexpected token '}'`)
    const q = await file('broken2.json', '{\n  "organization": {"key": "acme",\n    name: "Acme"}}')
    expect(await failure(loadSetupFile(q))).toBe(`SetupError: ${q}: invalid JSON: line 3, column 5: Expected double-quoted property name`)
    const r = await file('broken3.json', '{"organization": {"key": "acme"}}\n{}')
    expect(await failure(loadSetupFile(r))).toBe(`SetupError: ${r}: invalid JSON: line 2, column 1: Unexpected non-whitespace character after the JSON value`)
  })

  it('refuses a JSON member named twice, YAML aliases without an end or an anchor, and a file that is not UTF-8, in one line naming the file', async () => {
    const dup = await file('dup.json', '{"organization": {"key": "acme", "name": "A"},\n "organization": {"key": "typo"}}')
    expect(await failure(loadSetupFile(dup))).toBe(`SetupError: ${dup}: invalid JSON: line 2, column 2: a member is named twice in one object (the first would be lost)`)
    const loop = await file('loop.yaml', 'organization: &a {key: acme, x: *a}\n')
    expect(await failure(loadSetupFile(loop))).toBe(`SetupError: ${loop}: an alias refers to a node that holds it (*a inside &a), which has no end`)
    const unresolved = await file('unresolved.yaml', 'organization: {key: acme, name: *nope}\n')
    expect(await failure(loadSetupFile(unresolved))).toMatch(new RegExp(`^SetupError: ${unresolved.replaceAll('.', '\\.')}: .*nope`))
    const bomb = await file('bomb.yaml', ['a: &a [x, x, x, x, x, x, x, x, x]', ...'bcdefghi'.split('').map((c, i) => `${c}: &${c} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(', ')}]`), 'organization: {key: acme}'].join('\n'))
    expect(await failure(loadSetupFile(bomb))).toMatch(new RegExp(`^SetupError: ${bomb.replaceAll('.', '\\.')}: `))
    const latin1 = path.join(dir, 'latin1.yaml')
    await writeFile(latin1, Buffer.from('organization: {key: acme, name: Caf\xe9}\n', 'latin1'))
    expect(await failure(loadSetupFile(latin1))).toBe(`SetupError: ${latin1}: is not UTF-8 text (saved in another encoding, such as Windows-1252?): save it as UTF-8`)
  })

  it('refuses what the store cannot keep as written, as an API body would be refused, rather than rounding it', async () => {
    const bounds = (max: string): string => YAML.replace('min: 0}', `min: 0, max: ${max}}`)
    const lost = await file('lost.yaml', bounds('9007199254740993'))
    expect(await failure(loadSetupFile(lost))).toBe(`SetupError: ${lost}: metamodel.asset_types[0].properties[2].max: the number 9007199254740993 cannot be kept exactly: integers beyond ±9007199254740991 (2^53 − 1) lose digits in a 64-bit float`)
    const long = await file('long.yaml', bounds('12345678901234567890123'))
    expect(await failure(loadSetupFile(long))).toMatch(/properties\[2\]\.max: the number 12345678901234567890123 cannot be kept exactly/)
    const huge = await file('huge.yaml', bounds('1e400'))
    expect(await failure(loadSetupFile(huge))).toBe(`SetupError: ${huge}: metamodel.asset_types[0].properties[2].max: number out of range: it does not fit a 64-bit float`)
    const nul = await file('nul.yaml', YAML.replace('name: Owner', 'name: "Own\\0er"'))
    expect(await failure(loadSetupFile(nul))).toBe(`SetupError: ${nul}: users[0].name: text must not contain NUL (U+0000) characters`)
    const json = await file('lost.json', JSON.stringify(LOADED).replace('"min":0,"max":null', '"min":0,"max":9007199254740993'))
    expect(await failure(loadSetupFile(json))).toMatch(/lost\.json: metamodel\.asset_types\[0\]\.properties\[2\]\.max: the number 9007199254740993 cannot be kept exactly/)
    // Integers a float holds exactly, in any notation YAML has, load as numbers.
    const exact = await loadSetupFile(await file('exact.yaml', bounds('9007199254740991')))
    expect(exact.metamodel?.asset_types?.[0]?.properties[2]?.max).toBe(9007199254740991)
    const hex = await loadSetupFile(await file('hex.yaml', bounds('0x10')))
    expect(hex.metamodel?.asset_types?.[0]?.properties[2]?.max).toBe(16)
  })

  it('names an empty file, and a YAML file of several documents, in words of its own', async () => {
    for (const [name, text] of [['empty.yaml', ''], ['blank.json', ' \n\n'], ['comments.yaml', '# nothing yet\n']] as const) {
      const p = await file(name, text)
      expect(await failure(loadSetupFile(p))).toBe(`SetupError: ${p}: the file is empty: it describes one organization (organization, access_domains, roles, users, metamodel; see examples/acme.yaml)`)
    }
    const p = await file('two.yaml', 'organization: {key: a}\n---\norganization: {key: b}\n')
    expect(await failure(loadSetupFile(p))).toBe(`SetupError: ${p}: line 2: the file holds several YAML documents (a line ---); it describes one organization: one document per file`)
  })
})

/** The error of loading `data` (an object of the file's shape) as acme.yaml. */
function errorOf(data: unknown): string {
  try {
    validateSetup(data, 'acme.yaml')
  } catch (err) {
    return (err as Error).message
  }
  return 'no error'
}

function withProperty(property: Record<string, unknown>) {
  const s = baseSetup('acme')
  s.metamodel.asset_types[0]!.properties.push(property)
  return s
}

describe('validateSetup: one line naming the file and the field', () => {
  it.each([
    ['an empty file', null, 'acme.yaml: must be an object'],
    ['no organization', {}, 'acme.yaml: organization: is required'],
    ['an unknown field', { organization: { key: 'acme', plan: 'gold' } }, 'acme.yaml: organization.plan: is not a known field'],
    ['a bad key', { organization: { key: 'Acme' } }, 'acme.yaml: organization.key: must be a key: a lowercase letter, then up to 62 lowercase letters, digits or _'],
    ['an empty name', { organization: { key: 'acme', name: '' } }, 'acme.yaml: organization.name: must not be empty'],
    ['a zero rate limit', { organization: { key: 'acme', rate_limit: { requests: 0 } } }, 'acme.yaml: organization.rate_limit.requests: must be ≥ 1'],
    ['a fractional window', { organization: { key: 'acme', rate_limit: { window_seconds: 1.5 } } }, 'acme.yaml: organization.rate_limit.window_seconds: must be an integer'],
    ['a bad address', { organization: { key: 'acme', ip_allowlist: ['10.0.0.0/8', '10.0.0.300'] } }, 'acme.yaml: organization.ip_allowlist[1]: must be an IPv4 or IPv6 address or CIDR range'],
    ['a bad prefix length', { organization: { key: 'acme', ip_allowlist: ['::/129'] } }, 'acme.yaml: organization.ip_allowlist[0]: must be an IPv4 or IPv6 address or CIDR range'],
    ['a legacy IPv4 form', { organization: { key: 'acme', ip_allowlist: ['10'] } }, 'acme.yaml: organization.ip_allowlist[0]: must be an IPv4 or IPv6 address or CIDR range'],
    ['a repeated address', { organization: { key: 'acme', ip_allowlist: ['::1', '::1'] } }, 'acme.yaml: organization.ip_allowlist: must not list "::1" twice'],
  ])('rejects %s', (_, data, message) => {
    expect(errorOf(data)).toBe(message)
  })

  it('names the bad property type with the allowed ones', () => {
    const s = withProperty({ key: 'ram', type: 'float' })
    expect(errorOf(s)).toBe(`acme.yaml: metamodel.asset_types[0].properties[4].type: must be one of ${TYPES}`)
  })

  it.each([
    ['a bad email', (s: any) => (s.users[0].email = 'owner'), 'users[0].email: must be an email address'],
    ['a bad permission type', (s: any) => (s.users[1].permission_type = 'Root'), 'users[1].permission_type: must be one of Viewer, Editor, Admin, Owner'],
    ['a user without name', (s: any) => delete s.users[0].name, 'users[0].name: is required'],
    ['a bad level', (s: any) => (s.roles[0].grants[0].level = 'write'), 'roles[0].grants[0].level: must be one of view, edit, delete, edit_access_domain'],
    ['a grant without domain', (s: any) => delete s.roles[0].grants[0].access_domain_key, 'roles[0].grants[0].access_domain_key: is required'],
    ['a bad grant domain', (s: any) => (s.roles[0].grants[0].access_domain_key = 'I T'), 'roles[0].grants[0].access_domain_key: must be an access domain key, null (assets without a domain) or "*" (every domain and none)'],
    ['an empty asset type list', (s: any) => (s.roles[0].grants[0].asset_type_keys = []), 'roles[0].grants[0].asset_type_keys: must list at least 1 item'],
    ['"*" among keys', (s: any) => (s.roles[0].grants[0].asset_type_keys = ['*', 'server']), 'roles[0].grants[0].asset_type_keys: "*" must stand alone'],
    ['a repeated access domain', (s: any) => s.access_domains.push({ key: 'it' }), 'access_domains[2].key: it is listed twice'],
    ['a repeated role', (s: any) => s.roles.push({ key: 'all', grants: [] }), 'roles[2].key: all is listed twice'],
    ['a repeated user', (s: any) => s.users.push({ ...s.users[0] }), 'users[2].email: owner@acme.test is listed twice'],
    ['a repeated asset type', (s: any) => s.metamodel.asset_types.push({ key: 'server' }), 'metamodel.asset_types[2].key: server is listed twice'],
    ['a repeated property', (s: any) => s.metamodel.asset_types[1].properties.push({ key: 'code', type: 'text' }), 'metamodel.asset_types[1].properties[1].key: code is listed twice'],
    ['a repeated relationship type', (s: any) => s.metamodel.relationship_types.push({ key: 'runs_on' }), 'metamodel.relationship_types[2].key: runs_on is listed twice'],
    ['an unknown access domain in a grant', (s: any) => (s.roles[1].grants[0].access_domain_key = 'hr'), 'roles[1].grants[0].access_domain_key: unknown access domain hr'],
    ['an unknown asset type in a grant', (s: any) => (s.roles[1].grants[0].asset_type_keys = ['server', 'router']), 'roles[1].grants[0].asset_type_keys[1]: unknown asset type router'],
    ['an unknown role of a user', (s: any) => (s.users[1].role_keys = ['admin']), 'users[1].role_keys[0]: unknown role admin'],
    ['an unknown field of a relationship type', (s: any) => (s.metamodel.relationship_types[1].sources = []), 'metamodel.relationship_types[1].sources: is not a known field'],
  ])('rejects %s', (_, change, message) => {
    const s = baseSetup('acme')
    change(s)
    expect(errorOf(s)).toBe(`acme.yaml: ${message}`)
  })

  const at = 'acme.yaml: metamodel.asset_types[0].properties[4]'
  it.each([
    ['a second unique_key', { key: 'serial', type: 'unique_key' }, `${at}.type: asset type server already has the unique_key property hostname`],
    ['a select without options', { key: 'tier', type: 'select' }, `${at}.options: is required for type select`],
    ['options on text', { key: 'tier', type: 'text', options: ['a'] }, `${at}.options: is only allowed for types select and multi_select`],
    ['empty options', { key: 'tier', type: 'multi_select', options: [] }, `${at}.options: must list at least 1 item`],
    ['an empty option', { key: 'tier', type: 'select', options: ['a', ''] }, `${at}.options[1]: must not be empty`],
    ['a repeated option', { key: 'tier', type: 'select', options: ['a', 'b', 'a'] }, `${at}.options: must not list "a" twice`],
    ['a multi-select option holding |', { key: 'tier', type: 'multi_select', options: ['a', 'p|q'] }, `${at}.options[1]: "p|q" holds |, which joins the options of a multi_select in CSV files`],
    ['a currency without code', { key: 'cost', type: 'currency' }, `${at}.currency: is required for type currency`],
    ['a lowercase code', { key: 'cost', type: 'currency', currency: 'eur' }, `${at}.currency: must be a 3-letter ISO 4217 code in capitals, e.g. EUR`],
    ['an unknown code', { key: 'cost', type: 'currency', currency: 'ABC' }, `${at}.currency: ABC is not an ISO 4217 currency code`],
    ['a code on a number', { key: 'cost', type: 'number', currency: 'EUR' }, `${at}.currency: is only allowed for type currency`],
    ['bounds on text', { key: 'ram', type: 'text', max: 3 }, `${at}.max: is only allowed for types number, integer, currency and score`],
    ['bounds on a percentage', { key: 'ram', type: 'percentage', min: 3 }, `${at}.min: is only allowed for types number, integer, currency and score`],
    ['min above max', { key: 'ram', type: 'number', min: 5, max: 1 }, `${at}.min: min 5 is greater than max 1`],
    ['a score min above the default max', { key: 'rank', type: 'score', min: 6 }, `${at}.min: min 6 is greater than max 5`],
    ['a fractional score bound', { key: 'rank', type: 'score', max: 2.5 }, `${at}.max: must be an integer for type score`],
    ['a fractional integer bound', { key: 'ram', type: 'integer', min: 0.5 }, `${at}.min: must be an integer for type integer`],
    ['a string bound', { key: 'ram', type: 'number', min: '1' }, `${at}.min: must be a number or null`],
  ])('rejects %s', (_, property, message) => {
    expect(errorOf(withProperty(property))).toBe(message)
  })

  it('leaves references into sections the file does not list to apply (they may be in the store)', () => {
    const data = { organization: { key: 'acme' }, roles: [{ key: 'r', grants: [{ access_domain_key: 'hr', asset_type_keys: ['vm'], level: 'view' }] }] }
    expect(validateSetup(data).roles).toEqual([
      { key: 'r', name: 'r', description: null, grants: [{ access_domain_key: 'hr', asset_type_keys: ['vm'], level: 'view' }] },
    ])
  })

  it('parses text directly (parseSetup) with the same messages', () => {
    expect(() => parseSetup('organization: {key: 1}', 'inline.yaml', 'yaml')).toThrow(new SetupError('inline.yaml: organization.key: must be a string'))
  })
})
