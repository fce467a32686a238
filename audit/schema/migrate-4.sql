-- Migration 3 -> 4: one row per request of a terminated tunnel (a host
-- bound to a credential, ksb-policy(5) CREDENTIALS), chained like the
-- other records.  Run inside the migration's transaction; ksb-gatewayd
-- then sets PRAGMA user_version = 4.  Creates a table only, so it also
-- runs first when older versions are migrated.
CREATE TABLE requests (
	seq		INTEGER PRIMARY KEY,
	conn_id		INTEGER NOT NULL,	-- connections.id (the tunnel)
	ts_ms		INTEGER NOT NULL,	-- when the request ended
	method		TEXT NOT NULL,		-- "-" when none could be read
	path		TEXT NOT NULL,		-- without the query, escaped
	status		INTEGER,		-- NULL: no response
	bytes_up	INTEGER NOT NULL,	-- request head and body
	bytes_down	INTEGER NOT NULL,	-- response head and body
	credential	TEXT,			-- the credential swapped in
	reason		TEXT,			-- NULL: answered by the upstream
	hash		BLOB NOT NULL
);
CREATE INDEX requests_conn ON requests (conn_id);
