-- ksb audit database, schema version 2: frozen copy (tests, migrations).
-- Documented in ksb-audit(5) of that version.
--
-- Times are milliseconds since the Unix epoch, UTC.  Text that came from a
-- guest (host, sni) is stored escaped: bytes outside printable ASCII
-- appear as \xHH.
--
-- Hash chain: every record of connections, closes, policy_versions,
-- registrations and unregistrations has a `seq' (one sequence across the
-- five tables, no gaps) and `hash' = SHA-256(hash of record seq-1 ||
-- canonical encoding of the record); see ksb-audit(5).  chain_anchor holds
-- the seq and hash that precede the oldest record kept (retention).

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
	hash		BLOB
);
CREATE INDEX connections_ts ON connections (ts_ms);
CREATE INDEX connections_instance ON connections (instance, ts_ms);
CREATE INDEX connections_decision ON connections (decision, ts_ms);

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

CREATE VIEW denials AS
	SELECT id, ts_ms, instance, client_addr, host, port, sni, reason
	FROM connections WHERE decision = 'deny';

CREATE VIEW egress_by_host AS
	SELECT instance, host, port, count(*) AS connections,
	    sum(coalesce(bytes_up, 0)) AS bytes_up,
	    sum(coalesce(bytes_down, 0)) AS bytes_down,
	    max(ts_ms) AS last_ms
	FROM connections WHERE decision = 'allow'
	GROUP BY instance, host, port;

CREATE VIEW active_tunnels AS
	SELECT id, ts_ms, instance, host, port, upstream_addr
	FROM connections WHERE decision = 'allow' AND closed_ms IS NULL;

CREATE VIEW instance_totals AS
	SELECT instance, count(*) AS connections,
	    sum(decision = 'allow') AS allowed,
	    sum(decision = 'deny') AS denied,
	    sum(coalesce(bytes_up, 0)) AS bytes_up,
	    sum(coalesce(bytes_down, 0)) AS bytes_down,
	    min(ts_ms) AS first_ms, max(ts_ms) AS last_ms
	FROM connections GROUP BY instance;
