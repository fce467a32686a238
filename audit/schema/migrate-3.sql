-- Migration 2 -> 3: derived per-instance and per-(instance, host, port)
-- totals, so that instance_totals, egress_by_host and `ksbctl audit
-- summary' read a few rows instead of every connection.  Run inside the
-- migration's transaction; ksb-gatewayd then sets PRAGMA user_version = 3.
-- The same two INSERT .. SELECT statements rebuild the totals from the
-- rows (after DELETE FROM totals_instance; DELETE FROM totals_host).
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
	last_ms		INTEGER,
	last_allow_ms	INTEGER
);
-- Denials of one instance, newest first (--instance ID --denied, denials).
CREATE INDEX connections_denied ON connections (instance, ts_ms)
	WHERE decision = 'deny';
CREATE INDEX totals_instance_key ON totals_instance (instance);
CREATE INDEX totals_host_key ON totals_host (instance, host, port);
CREATE INDEX totals_host_host ON totals_host (host);

INSERT INTO totals_instance SELECT instance, count(*),
    sum(decision = 'allow'), sum(decision = 'deny'),
    sum(coalesce(bytes_up, 0)), sum(coalesce(bytes_down, 0)),
    min(ts_ms), max(ts_ms)
    FROM connections GROUP BY instance;
INSERT INTO totals_host SELECT instance, host, port, count(*),
    sum(decision = 'allow'), sum(decision = 'deny'),
    sum(coalesce(bytes_up, 0)), sum(coalesce(bytes_down, 0)),
    max(ts_ms), max(CASE WHEN decision = 'allow' THEN ts_ms END)
    FROM connections GROUP BY instance, host, port;

DROP VIEW egress_by_host;
CREATE VIEW egress_by_host AS
	SELECT instance, host, port, allowed AS connections, bytes_up,
	    bytes_down, last_allow_ms AS last_ms
	FROM totals_host WHERE allowed > 0;

DROP VIEW instance_totals;
CREATE VIEW instance_totals AS
	SELECT instance, connections, allowed, denied, bytes_up, bytes_down,
	    first_ms, last_ms
	FROM totals_instance;
