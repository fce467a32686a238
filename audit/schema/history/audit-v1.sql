-- ksb audit database, schema version 1: frozen copy (tests, migrations).
-- Documented in ksb-audit(5).  Times are milliseconds since the Unix epoch,
-- UTC.  Text that came from a guest (host, sni) is stored escaped: bytes
-- outside printable ASCII appear as \xHH.

-- One row per decision, allowed or denied.  The close fields (bytes_up ..
-- close_reason) are filled when an allowed tunnel ends.
CREATE TABLE IF NOT EXISTS connections (
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
	closed_ms	INTEGER
);
CREATE INDEX IF NOT EXISTS connections_ts ON connections (ts_ms);
CREATE INDEX IF NOT EXISTS connections_instance ON connections (instance, ts_ms);
CREATE INDEX IF NOT EXISTS connections_decision ON connections (decision, ts_ms);

-- Every policy load and reload attempt.
CREATE TABLE IF NOT EXISTS policy_versions (
	id		INTEGER PRIMARY KEY,
	ts_ms		INTEGER NOT NULL,
	digest		TEXT,			-- SHA-256 hex; NULL if it failed
	ok		INTEGER NOT NULL,
	files		TEXT NOT NULL,
	errors		TEXT
);

-- Instance registrations (leases held by ksb-run).
CREATE TABLE IF NOT EXISTS registrations (
	id		INTEGER PRIMARY KEY,
	instance	TEXT NOT NULL,
	profile		TEXT NOT NULL,
	tap		TEXT NOT NULL,
	mac		TEXT NOT NULL,
	ip		TEXT NOT NULL,
	registered_ms	INTEGER NOT NULL,
	unregistered_ms	INTEGER
);

CREATE VIEW IF NOT EXISTS denials AS
	SELECT id, ts_ms, instance, client_addr, host, port, sni, reason
	FROM connections WHERE decision = 'deny';

CREATE VIEW IF NOT EXISTS egress_by_host AS
	SELECT instance, host, port, count(*) AS connections,
	    sum(coalesce(bytes_up, 0)) AS bytes_up,
	    sum(coalesce(bytes_down, 0)) AS bytes_down,
	    max(ts_ms) AS last_ms
	FROM connections WHERE decision = 'allow'
	GROUP BY instance, host, port;

CREATE VIEW IF NOT EXISTS active_tunnels AS
	SELECT id, ts_ms, instance, host, port, upstream_addr
	FROM connections WHERE decision = 'allow' AND closed_ms IS NULL;
