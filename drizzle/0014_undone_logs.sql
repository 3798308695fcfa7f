-- The logs of blocks a reorg undid (src/db/schema.ts undoneLogs), moved here by the rewind that deletes them
-- from logs, so that log filters polled across the reorg report them again with removed: true, as geth does.
-- A new, empty table: nothing is rewritten.
CREATE TABLE IF NOT EXISTS "undone_logs" (
	"block_hash" bytea NOT NULL,
	"log_index" integer NOT NULL,
	"block_number" bigint NOT NULL,
	"block_timestamp" bigint NOT NULL,
	"transaction_hash" bytea NOT NULL,
	"transaction_index" integer NOT NULL,
	"address" bytea NOT NULL,
	"topic0" bytea,
	"topic1" bytea,
	"topic2" bytea,
	"topic3" bytea,
	"data" bytea NOT NULL,
	"undone_at" bigint NOT NULL,
	CONSTRAINT "undone_logs_block_hash_log_index_pk" PRIMARY KEY("block_hash","log_index")
);
