-- Migration to 5: the agent turn of a connection (issue 15).  ksb-run
-- tells the gateway which turn of an agent-mode instance is running
-- (TURN, proto/ctl.h); each connection row written meanwhile records it.
-- NULL: not an agent-mode instance, or before its first turn.  The
-- column is beside the hash chain's columns (ksb-audit(5)).  Run inside
-- the migration's transaction; ksb-gatewayd then sets PRAGMA
-- user_version = 5.
ALTER TABLE connections ADD COLUMN turn INTEGER;
CREATE INDEX connections_turn ON connections (instance, turn)
	WHERE turn IS NOT NULL;
