-- Migration to 8: the agent turn in the hash chain (issue 15).  Rows of
-- connections written from now on are hashed with their turn after the
-- other chained fields and say so with chain_v = 2; rows written before
-- keep chain_v NULL (their turn is not hashed) and verify as they did
-- (ksb-audit(5), HASH CHAIN).  Run inside the migration's transaction;
-- ksb-gatewayd then sets PRAGMA user_version = 8.
ALTER TABLE connections ADD COLUMN chain_v INTEGER;
