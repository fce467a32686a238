-- Migration to 7: port forwards in the audit (issue 16).  ksb-run tells
-- the gateway, on its lease's connection (FORWARD, proto/ctl.h), each
-- forward added and removed and each forwarded connection opened,
-- closed (with its bytes each way and its duration) or refused; one
-- chained record each (ksb-audit(5)).  Creates a table only, so it runs
-- first from any older version (as 4 does; version 6 is another
-- change's and independent of this one).  Run inside the migration's
-- transaction; ksb-gatewayd then sets PRAGMA user_version.
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
