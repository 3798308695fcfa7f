-- The `logs` indexes keyed on 8 bytes of the address (its last) and of topic0 (its first) instead of the
-- whole values (src/db/log-keys.ts): an entry of the address index is 40 bytes instead of 72. Queries name
-- the whole value beside its key. Dropping an index of the partitioned table drops every partition's; the
-- new ones are built on every partition here (on a large index this takes a while, once).
DROP INDEX IF EXISTS "logs_address_topic0_idx";--> statement-breakpoint
DROP INDEX IF EXISTS "logs_topic0_idx";--> statement-breakpoint
CREATE INDEX "logs_address_topic0_idx" ON "logs" USING btree (substr("address", 13, 8), substr("topic0", 1, 8), "block_number");--> statement-breakpoint
CREATE INDEX "logs_topic0_idx" ON "logs" USING btree (substr("topic0", 1, 8), "block_number");
