-- A webhook sees what the key that set its URL sees (spec: "Roles limit what a key can see …";
-- CONTRACT §13: a key sees the events of the assets it can see). `role_keys` are that key's roles
-- its owner holds (a console user's: all of the user's), set when the webhook is created and
-- whenever a PATCH sets its `url`; deliveries are queued only for events those roles' grants reach
-- (src/webhooks/sql.ts insertMatchingDeliveries), read from the roles as they are at delivery.
-- NULL: a webhook made before this migration, which keeps receiving every event.
ALTER TABLE webhooks ADD COLUMN role_keys text[];
