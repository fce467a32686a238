-- Migration to 11 (issue 31).  Run inside the migration's transaction,
-- before the writer prepares its statements; ksb-gatewayd then sets
-- PRAGMA user_version = 11.
--
-- login_refreshes: each refresh of an imported subscription login
-- (`source login NAME', ksb-policy(5)) at the provider's token endpoint
-- by the gateway's refresher (gateway/parent/login.c): when, which login,
-- why, and how it ended.  Never a token: the error is the provider's
-- error code or the transport's message.
CREATE TABLE IF NOT EXISTS login_refreshes (
	seq		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,	-- when the attempt ended
	login		TEXT NOT NULL,		-- the store's name
	provider	TEXT NOT NULL CHECK (provider IN ('claude', 'codex')),
	trigger		TEXT NOT NULL CHECK (trigger IN ('expiry', 'refused',
			    'orphan')),
	outcome		TEXT NOT NULL CHECK (outcome IN ('refreshed',
			    'failed')),
	error		TEXT,			-- failed: why (no value)
	expires_ms	INTEGER,		-- refreshed: the new expiry
	duration_ms	INTEGER,		-- the attempt, -1 unknown
	hash		BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS login_refreshes_login ON login_refreshes
	(login, ts_ms);
