import type { FastifyInstance, FastifyRequest } from 'fastify'
import { createKey, deleteKey, getKey, listKeys, updateKey, type KeyInput } from '../keys/service.js'
import { AppError, Errors } from '../core/errors.js'
import type { KeyPermission } from '../core/auth/permissions.js'
import type { TypedForm } from './sql.js'
import { permissionAtLeast } from '../core/auth/permissions.js'
import { KEY_DESCRIPTION_MAX_LENGTH, KEY_NAME_MAX_LENGTH } from '../keys/limits.js'
import { backWithRefusal, field, fields, query, redirectWith, render, typedForm } from './plugin.js'
import { pager } from './pages.js'
import { webhookPages, webhooksForPage } from './webhooks.js'

const KEY_TYPES: KeyPermission[] = ['Viewer', 'Editor', 'Admin']
const SETTINGS = '/console/developer-settings'

function pageNumber(request: FastifyRequest): number {
  const n = Number(query(request, 'page'))
  return Number.isInteger(n) && n >= 1 && n <= 100_000 ? n : 1
}

/** The key form's fields, checked as the API's schema checks them (the service checks the rest). */
function keyInput(request: FastifyRequest): KeyInput {
  const name = field(request, 'name').trim()
  const type = field(request, 'permission_type')
  const roles = [...new Set(fields(request, 'role_keys'))]
  const problems: string[] = []
  if (name === '' || [...name].length > KEY_NAME_MAX_LENGTH) problems.push(`Name: give the key a name (at most ${KEY_NAME_MAX_LENGTH} characters).`)
  if (!(KEY_TYPES as string[]).includes(type)) problems.push('Permission type: choose Viewer, Editor or Admin.')
  if (roles.length === 0) problems.push('Roles: choose at least one role.')
  if ([...field(request, 'description')].length > KEY_DESCRIPTION_MAX_LENGTH) problems.push(`Description: at most ${KEY_DESCRIPTION_MAX_LENGTH.toLocaleString('en')} characters.`)
  if (problems.length > 0) throw new AppError(Errors.VALIDATION_FAILED, problems.join(' '))
  return { name, description: field(request, 'description').trim() || null, permission_type: type as KeyPermission, role_keys: roles }
}

/** /console/developer-settings: API keys through the API's own service (keys/service.ts). */
export async function settingsPages(app: FastifyInstance): Promise<void> {
  app.get('/developer-settings', async (request, reply) => {
    const c = request.console!
    const auth = c.ctx.auth
    const canManage = auth.permission !== 'Viewer'
    const keys = canManage ? await listKeys(c.ctx, { number: pageNumber(request), size: 50 }) : null
    // `active`: the user's keys work (enabled, with a sign-in method; else api_key_inactive).
    const users = (await app.db.query<{ id: string; email: string; name: string; role_keys: string[]; active: boolean }>(
      'SELECT id, email, name, role_keys, enabled AND cardinality(sign_in_methods) > 0 AS active FROM users WHERE org_id = $1 ORDER BY email', [auth.orgId],
    )).rows
    const email = new Map(users.map((u) => [u.id, u.email]))
    const allRoles = (await app.db.query<{ key: string; name: string }>('SELECT key, name FROM roles WHERE org_id = $1 ORDER BY key', [auth.orgId])).rows
    const isAdmin = auth.permission === 'Admin'
    // What a form may offer, as the API checks it (keys/service.ts): roles the key's owner has,
    // and below Admin only those the user holds too; a key's own roles are always offered, chosen.
    const grantable = (ownerRoles: readonly string[], current: readonly string[] = []) => allRoles.filter((r) =>
      current.includes(r.key) || (ownerRoles.includes(r.key) && (isAdmin || auth.roleKeys.includes(r.key))))
    const rolesOf = new Map(users.map((u) => [u.id, u.role_keys]))
    return render(request, reply, 'settings.eta', {
      title: 'Developer settings',
      canManage,
      isAdmin,
      keys: keys?.data.map((k) => ({
        ...k, owner: email.get(k.owner_user_id) ?? k.owner_user_id, roles: grantable(rolesOf.get(k.owner_user_id) ?? [], k.role_keys),
      })) ?? [],
      pager: keys ? pager(SETTINGS, {}, keys.page) : null,
      creating: query(request, 'new') === 'key' && canManage,
      editing: query(request, 'edit'),
      transferring: query(request, 'transfer'),
      // A webhook's delete asked for and not confirmed yet.
      deletingWebhook: query(request, 'delete_webhook'),
      types: KEY_TYPES.filter((t) => permissionAtLeast(auth.permission, t)),
      roles: grantable(auth.roleKeys),
      keyLimits: { name: KEY_NAME_MAX_LENGTH, description: KEY_DESCRIPTION_MAX_LENGTH },
      allRoles,
      users,
      // What was typed into the form a refusal sent back here (`of`: which form), or null.
      typed: (of: string) => (c.flash?.form?.of === of ? c.flash.form.values : null),
      webhooks: await webhooksForPage(app, request),
      newWebhook: query(request, 'new') === 'webhook',
    })
  })
  await app.register(webhookPages)

  // A refusal goes back to the form with its message and what was typed into it.
  const onError = (request: FastifyRequest, reply: Parameters<typeof redirectWith>[2], err: unknown, back: string, form: TypedForm) =>
    backWithRefusal(app, request, reply, err, [Errors.VALIDATION_FAILED, Errors.FORBIDDEN], back, form)
  const keyForm = (request: FastifyRequest, of: string) => typedForm(request, of, { one: ['name', 'description', 'permission_type'], many: ['role_keys'] })

  // Actions the page does not offer the user (no form, no button) are forged requests: the 403
  // page, as every other (docs/console.md), not a message back on the form.
  const offered = (request: FastifyRequest, least: 'Editor' | 'Admin', message: string): void => {
    if (!permissionAtLeast(request.console!.ctx.auth.permission, least)) throw new AppError(Errors.FORBIDDEN, message)
  }

  app.post('/developer-settings/keys', async (request, reply) => {
    offered(request, 'Editor', 'Viewers cannot create API keys.')
    try {
      const key = await createKey(request.console!.ctx, keyInput(request))
      return redirectWith(app, request, reply, SETTINGS, {
        notice: `Created the API key ${key.name}. Copy its secret now: it is shown only this once.`,
        secrets: [{ of: `the API key ${key.name}`, value: key.secret }],
      })
    } catch (err) {
      return onError(request, reply, err, `${SETTINGS}?new=key`, keyForm(request, 'key:new'))
    }
  })

  app.post('/developer-settings/keys/:id', async (request, reply) => {
    const id = (request.params as { id: string }).id
    offered(request, 'Editor', 'Viewers cannot change API keys.')
    try {
      const key = await updateKey(request.console!.ctx, id, keyInput(request))
      app.authenticator.invalidate()
      return redirectWith(app, request, reply, SETTINGS, { notice: `Saved the API key ${key.name}.` })
    } catch (err) {
      return onError(request, reply, err, `${SETTINGS}?edit=${encodeURIComponent(id)}`, keyForm(request, `key:${id}`))
    }
  })

  app.post('/developer-settings/keys/:id/transfer', async (request, reply) => {
    const id = (request.params as { id: string }).id
    // Another user's key, or none, is not found for an Editor, as the API answers (getKey's 404);
    // its own is not its to give (403).
    await getKey(request.console!.ctx, id)
    offered(request, 'Admin', 'Only an Admin can give an API key to another user.')
    try {
      // The key's roles, or others the new owner has, in the same request (docs/api-keys.md).
      const roles = [...new Set(fields(request, 'role_keys'))]
      if (roles.length === 0) throw new AppError(Errors.VALIDATION_FAILED, 'Roles: choose at least one role.')
      const key = await updateKey(request.console!.ctx, id, { owner_user_id: field(request, 'owner_user_id'), role_keys: roles })
      app.authenticator.invalidate()
      return redirectWith(app, request, reply, SETTINGS, { notice: `Transferred the API key ${key.name}.` })
    } catch (err) {
      return onError(request, reply, err, `${SETTINGS}?transfer=${encodeURIComponent(id)}`, typedForm(request, `transfer:${id}`, { one: ['owner_user_id'], many: ['role_keys'] }))
    }
  })

  app.post('/developer-settings/keys/:id/delete', async (request, reply) => {
    const id = (request.params as { id: string }).id
    await deleteKey(request.console!.ctx, id)
    app.authenticator.invalidate()
    return redirectWith(app, request, reply, SETTINGS, { notice: 'Deleted the API key.' })
  })
}
