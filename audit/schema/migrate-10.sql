-- Migration to 10 (issue 29).  Run inside the migration's transaction,
-- before the writer prepares its statements; ksb-gatewayd then sets
-- PRAGMA user_version = 10.
--
-- request_opens: a terminated tunnel's request is recorded, chained and
-- committed before its first byte goes upstream (the proxy process holds
-- the head until the parent's commit); its row in `requests' is written
-- when it ends, with its status and bytes, or with reason
-- proxy_restarted when the proxy process died with it in flight.
CREATE TABLE IF NOT EXISTS request_opens (
	seq		INTEGER PRIMARY KEY,
	conn_id		INTEGER NOT NULL,	-- connections.id (the tunnel)
	ts_ms		INTEGER NOT NULL,	-- before its head went upstream
	method		TEXT NOT NULL,
	path		TEXT NOT NULL,		-- without the query, escaped
	credential	TEXT,			-- the credential swapped in
	hash		BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS request_opens_conn ON request_opens (conn_id);
-- selftests.trigger: 'rules' for the gateway's own check of its nftables
-- rules (gateway/parent/rulecheck.c), which wrote 'reload' before.  A
-- CHECK constraint cannot be altered: the table is rebuilt with its rows
-- as they are (seq and hash kept: the trigger is hashed, so rows already
-- chained keep 'reload').
CREATE TABLE selftests_10 (
	seq		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,
	instance	TEXT NOT NULL,
	trigger		TEXT NOT NULL CHECK (trigger IN ('boot', 'reload',
			    'rules')),
	result		TEXT NOT NULL CHECK (result IN ('ok', 'fail')),
	probes		INTEGER NOT NULL,
	failed		TEXT,
	duration_ms	INTEGER,
	action		TEXT NOT NULL CHECK (action IN ('none', 'refused',
			    'stopped')),
	policy_digest	TEXT,
	hash		BLOB NOT NULL
);
INSERT INTO selftests_10 SELECT seq, ts_ms, instance, trigger, result,
	probes, failed, duration_ms, action, policy_digest, hash FROM selftests;
DROP INDEX selftests_instance;
DROP TABLE selftests;
ALTER TABLE selftests_10 RENAME TO selftests;
CREATE INDEX selftests_instance ON selftests (instance, ts_ms);
