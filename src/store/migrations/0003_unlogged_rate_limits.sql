-- Rate-limit counters live for one window and matter only while the server runs: losing them in a
-- crash merely resets the windows. UNLOGGED skips the WAL, so a counter reservation costs no
-- fsync at commit (it is on the request path).
ALTER TABLE rate_limit_counters SET UNLOGGED;
