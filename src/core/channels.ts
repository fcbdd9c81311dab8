/** Notification channel: payload = organization id whose setup, keys or metamodel changed. */
export const INVALIDATE_CHANNEL = 'kbis_invalidate'
