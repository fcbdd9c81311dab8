-- Idempotency-Key (CONTRACT §16: a repeat "writes nothing"): the request holding a claim marks it
-- `written` inside each of its write transactions, so the mark commits exactly when its changes
-- do. Its answer is stored after the commit; a server that stops in between leaves a written claim
-- without an answer, which is never taken over or dropped (a repeat would write everything again):
-- its repeats are answered 409 until the key expires.
ALTER TABLE idempotency_keys ADD COLUMN written boolean NOT NULL DEFAULT false;
