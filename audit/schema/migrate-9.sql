-- Migration to 9: one index fewer on the decision path (issue 19).  The
-- (decision, ts_ms) index was read only for the denials (ksbctl audit
-- --denied, the denials view, audit summary --denied, ksbctl top), yet
-- every allowed row, the common kind, paid an entry in it; a partial
-- index of the denials by time serves the same queries (each still an
-- index range read from its newest end) and allowed rows skip it.  Run
-- inside the migration's transaction; ksb-gatewayd then sets PRAGMA
-- user_version = 9.
DROP INDEX IF EXISTS connections_decision;
CREATE INDEX connections_deny_ts ON connections (ts_ms)
	WHERE decision = 'deny';
