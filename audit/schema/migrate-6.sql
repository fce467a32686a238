-- Migration to 6: the enforcement self-test's results (issue 15), one
-- chained record each.  ksb-run reports what its guest's init found
-- (SELFTEST on the lease's connection, proto/ctl.h): at boot, before the
-- command starts, and after each policy reload the gateway announced
-- (RELOADED).  Run inside the migration's transaction; ksb-gatewayd then
-- sets PRAGMA user_version = 6.  Creates a table only.
CREATE TABLE selftests (
	seq		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,	-- when the gateway got it
	instance	TEXT NOT NULL,
	trigger		TEXT NOT NULL CHECK (trigger IN ('boot', 'reload')),
	result		TEXT NOT NULL CHECK (result IN ('ok', 'fail')),
	probes		INTEGER NOT NULL,	-- probes run (all failed: ok)
	failed		TEXT,			-- the probe that got through,
						-- 'timeout', 'skipped'; NULL: ok
	duration_ms	INTEGER,		-- in the guest; NULL: unknown
	action		TEXT NOT NULL CHECK (action IN ('none', 'refused',
			    'stopped')),	-- refused: the command was not
						-- started; stopped: the instance
	policy_digest	TEXT,			-- the policy the test ran under
	hash		BLOB NOT NULL
);
CREATE INDEX selftests_instance ON selftests (instance, ts_ms);
