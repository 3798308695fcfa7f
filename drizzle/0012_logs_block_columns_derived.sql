-- A log's block hash and block timestamp are its block's: they are read from `blocks` with the log (through
-- the covering index below, without reading the block's header) instead of being stored with every log,
-- ~48 bytes per log with their alignment. Dropping a column is a change of the catalog only: the bytes of
-- rows already written go when their partition is rewritten (sealed) or dropped (`--retain-blocks`).
ALTER TABLE "logs" DROP COLUMN "block_hash", DROP COLUMN "block_timestamp";--> statement-breakpoint
CREATE UNIQUE INDEX "blocks_number_hash_timestamp_idx" ON "blocks" USING btree ("number") INCLUDE ("hash", "timestamp");
