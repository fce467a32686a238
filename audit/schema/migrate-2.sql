-- Migration 1 -> 2: hash chain, close and unregistration records, anchor,
-- more indexes, instance_totals.  Run inside the migration's transaction;
-- ksb-gatewayd then chains the existing rows (in id order: registrations,
-- policy_versions, connections) and writes their close records, and sets
-- PRAGMA user_version = 2.
ALTER TABLE connections ADD COLUMN seq INTEGER;
ALTER TABLE connections ADD COLUMN hash BLOB;
ALTER TABLE policy_versions ADD COLUMN seq INTEGER;
ALTER TABLE policy_versions ADD COLUMN hash BLOB;
ALTER TABLE registrations ADD COLUMN seq INTEGER;
ALTER TABLE registrations ADD COLUMN hash BLOB;

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

CREATE TABLE unregistrations (
	seq		INTEGER PRIMARY KEY,
	reg_id		INTEGER NOT NULL,	-- registrations.id
	ts_ms		INTEGER NOT NULL,
	hash		BLOB NOT NULL
);

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

CREATE VIEW instance_totals AS
	SELECT instance, count(*) AS connections,
	    sum(decision = 'allow') AS allowed,
	    sum(decision = 'deny') AS denied,
	    sum(coalesce(bytes_up, 0)) AS bytes_up,
	    sum(coalesce(bytes_down, 0)) AS bytes_down,
	    min(ts_ms) AS first_ms, max(ts_ms) AS last_ms
	FROM connections GROUP BY instance;
