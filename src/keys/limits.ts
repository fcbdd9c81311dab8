/**
 * Lengths of an API key's name and description: the schemas of POST and PATCH /api-keys
 * (admin/schemas.ts) and `kbis keys create`, which makes no key the API would refuse.
 */
export const KEY_NAME_MAX_LENGTH = 200
export const KEY_DESCRIPTION_MAX_LENGTH = 2000
