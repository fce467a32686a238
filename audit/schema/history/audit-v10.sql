-- ksb audit database, schema version 10 (PRAGMA user_version = 10).
-- Documented in ksb-audit(5).  A new database is created from this file;
-- an older one is brought here by audit/schema/migrate-*.sql (forward
-- only), so both end with the same tables, columns, indexes and views.
--
-- Times are milliseconds since the Unix epoch, UTC.  Text that came from a
-- guest (host, sni) is stored escaped: bytes outside printable ASCII
-- appear as \xHH.
--
-- Hash chain: every record of connections, closes, policy_versions,
-- registrations, unregistrations, requests, request_opens, selftests and
-- forwards has a `seq' (one sequence across the nine tables, no gaps) and `hash' =
-- SHA-256(hash of record seq-1 || canonical encoding of the record); see
-- ksb-audit(5).  chain_anchor holds
-- the seq and hash that precede the oldest record kept (retention).
--
-- totals_instance and totals_host are derived data, not chained: the
-- aggregates of the connections rows present (pruned rows leave them),
-- kept by the writer in the transaction that writes a decision, a close
-- or a retention cut; `ksbctl audit verify' recomputes and compares them.

-- One row per decision, allowed or denied.  The close fields (bytes_up ..
-- closed_ms) are a copy of the tunnel's record in `closes', filled when an
-- allowed tunnel ends; they are the only columns ever updated.
CREATE TABLE connections (
	id		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,
	instance	TEXT,			-- NULL: source address not registered
	profile		TEXT,
	client_addr	TEXT NOT NULL,
	client_port	INTEGER NOT NULL,
	host		TEXT,			-- CONNECT host as requested
	port		INTEGER,
	sni		TEXT,
	upstream_addr	TEXT,
	upstream_port	INTEGER,
	decision	TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
	reason		TEXT NOT NULL,
	policy_digest	TEXT,
	bytes_up	INTEGER,		-- guest -> upstream
	bytes_down	INTEGER,		-- upstream -> guest
	duration_ms	INTEGER,
	close_reason	TEXT,
	closed_ms	INTEGER,
	seq		INTEGER,
	hash		BLOB,
	turn		INTEGER,		-- agent turn (TURN)
	chain_v		INTEGER			-- 2: turn hashed; NULL: not
);
CREATE INDEX connections_ts ON connections (ts_ms);
CREATE INDEX connections_turn ON connections (instance, turn)
	WHERE turn IS NOT NULL;
CREATE INDEX connections_instance ON connections (instance, ts_ms);

-- Every policy load and reload attempt.
CREATE TABLE policy_versions (
	id		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,
	digest		TEXT,			-- SHA-256 hex; NULL if it failed
	ok		INTEGER NOT NULL,
	files		TEXT NOT NULL,
	errors		TEXT,
	seq		INTEGER,
	hash		BLOB
);

-- Instance registrations (leases held by ksb-run).  unregistered_ms is a
-- copy of the registration's record in `unregistrations'.
CREATE TABLE registrations (
	id		INTEGER PRIMARY KEY,
	instance	TEXT NOT NULL,
	profile		TEXT NOT NULL,
	tap		TEXT NOT NULL,
	mac		TEXT NOT NULL,
	ip		TEXT NOT NULL,
	registered_ms	INTEGER NOT NULL,
	unregistered_ms	INTEGER,
	seq		INTEGER,
	hash		BLOB
);

-- The end of an allowed tunnel: one record per connection.
CREATE TABLE closes (
	seq		INTEGER PRIMARY KEY,
	conn_id		INTEGER NOT NULL,	-- connections.id
	ts_ms		INTEGER NOT NULL,
	bytes_up	INTEGER,
	bytes_down	INTEGER,
	duration_ms	INTEGER,
	reason		TEXT NOT NULL,
	hash		BLOB NOT NULL
);

-- The end of a registration.
CREATE TABLE unregistrations (
	seq		INTEGER PRIMARY KEY,
	reg_id		INTEGER NOT NULL,	-- registrations.id
	ts_ms		INTEGER NOT NULL,
	hash		BLOB NOT NULL
);

-- One row per request of a terminated tunnel (audit/schema/migrate-4.sql).
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

-- A request of a terminated tunnel as it is sent: committed before its
-- first byte goes upstream; its `requests' row follows when it ends
-- (audit/schema/migrate-10.sql).
CREATE TABLE request_opens (
	seq		INTEGER PRIMARY KEY,
	conn_id		INTEGER NOT NULL,	-- connections.id (the tunnel)
	ts_ms		INTEGER NOT NULL,	-- before its head went upstream
	method		TEXT NOT NULL,
	path		TEXT NOT NULL,		-- without the query, escaped
	credential	TEXT,			-- the credential swapped in
	hash		BLOB NOT NULL
);
CREATE INDEX request_opens_conn ON request_opens (conn_id);

-- The enforcement self-test's results, at boot and after each reload
-- (audit/schema/migrate-6.sql).
CREATE TABLE selftests (
	seq		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,	-- when the gateway got it
	instance	TEXT NOT NULL,
	trigger		TEXT NOT NULL CHECK (trigger IN ('boot', 'reload',
			    'rules')),		-- rules: the gateway's own
						-- check (audit/schema/migrate-10.sql)
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
-- Port forwards of ksb-run (audit/schema/migrate-7.sql): one row per forward
-- added or removed and per forwarded connection opened, closed or refused.
CREATE TABLE forwards (
	seq		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,	-- when the gateway got it
	instance	TEXT NOT NULL,
	event		TEXT NOT NULL,		-- add remove open close
						-- refused budget
	listen_addr	TEXT NOT NULL,		-- the host side
	listen_port	INTEGER NOT NULL,
	guest_port	INTEGER NOT NULL,	-- 127.0.0.1:PORT in the guest
	stream		INTEGER,		-- open, close: the connection
	peer		TEXT,			-- open, refused: host client
	bytes_to_guest	INTEGER,		-- close
	bytes_from_guest INTEGER,		-- close
	duration_ms	INTEGER,		-- close
	reason		TEXT,			-- close remove refused budget
	hash		BLOB NOT NULL
);
CREATE INDEX forwards_instance ON forwards (instance, ts_ms);

-- The record the oldest kept one chains onto (one row; absent: genesis,
-- the chain starts at seq 1 from 32 zero bytes).
CREATE TABLE chain_anchor (
	id		INTEGER PRIMARY KEY CHECK (id = 1),
	seq		INTEGER NOT NULL,
	hash		BLOB NOT NULL,
	ts_ms		INTEGER NOT NULL,	-- when it was set
	reason		TEXT NOT NULL		-- 'retention' or 'replaced'
);

CREATE UNIQUE INDEX connections_seq ON connections (seq);
CREATE INDEX connections_host ON connections (host, ts_ms);
CREATE INDEX connections_open ON connections (decision, closed_ms)
	WHERE decision = 'allow' AND closed_ms IS NULL;
CREATE UNIQUE INDEX policy_versions_seq ON policy_versions (seq);
CREATE UNIQUE INDEX registrations_seq ON registrations (seq);
CREATE INDEX closes_conn ON closes (conn_id);
CREATE INDEX unregistrations_reg ON unregistrations (reg_id);

-- Derived totals (not chained), see above and audit/schema/migrate-3.sql.
CREATE TABLE totals_instance (
	instance	TEXT,			-- NULL: source not registered
	connections	INTEGER NOT NULL,
	allowed		INTEGER NOT NULL,
	denied		INTEGER NOT NULL,
	bytes_up	INTEGER NOT NULL,
	bytes_down	INTEGER NOT NULL,
	first_ms	INTEGER,
	last_ms		INTEGER
);
CREATE TABLE totals_host (
	instance	TEXT,
	host		TEXT,
	port		INTEGER,
	connections	INTEGER NOT NULL,
	allowed		INTEGER NOT NULL,
	denied		INTEGER NOT NULL,
	bytes_up	INTEGER NOT NULL,
	bytes_down	INTEGER NOT NULL,
	last_ms		INTEGER,		-- last decision
	last_allow_ms	INTEGER			-- last allowed decision
);
-- Denials of one instance, newest first (--instance ID --denied, denials).
CREATE INDEX connections_denied ON connections (instance, ts_ms)
	WHERE decision = 'deny';
-- Denials of every instance by time (audit/schema/migrate-9.sql: allowed
-- rows, the common kind, have no entry in it).
CREATE INDEX connections_deny_ts ON connections (ts_ms)
	WHERE decision = 'deny';
CREATE INDEX totals_instance_key ON totals_instance (instance);
CREATE INDEX totals_host_key ON totals_host (instance, host, port);
CREATE INDEX totals_host_host ON totals_host (host);

CREATE VIEW denials AS
	SELECT id, ts_ms, instance, client_addr, host, port, sni, reason
	FROM connections WHERE decision = 'deny';

CREATE VIEW egress_by_host AS
	SELECT instance, host, port, allowed AS connections, bytes_up,
	    bytes_down, last_allow_ms AS last_ms
	FROM totals_host WHERE allowed > 0;

CREATE VIEW active_tunnels AS
	SELECT id, ts_ms, instance, host, port, upstream_addr
	FROM connections WHERE decision = 'allow' AND closed_ms IS NULL;

CREATE VIEW instance_totals AS
	SELECT instance, connections, allowed, denied, bytes_up, bytes_down,
	    first_ms, last_ms
	FROM totals_instance;
