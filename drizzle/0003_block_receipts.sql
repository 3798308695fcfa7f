CREATE TABLE "block_receipts" (
	"block_number" bigint PRIMARY KEY NOT NULL,
	"body" text NOT NULL
);
--> statement-breakpoint
-- lz4 where the server has it (Postgres 14+ built with lz4): a block's receipts are read whole on every
-- uncached eth_getBlockReceipts, and lz4 decompresses several times faster than the default pglz.
-- PGlite is built without it and keeps pglz.
DO $$ BEGIN
	ALTER TABLE "block_receipts" ALTER COLUMN "body" SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN NULL;
END $$;
