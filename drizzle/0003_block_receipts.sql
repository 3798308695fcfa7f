CREATE TABLE "block_receipts" (
	"block_number" bigint PRIMARY KEY NOT NULL,
	"deflated" "bytea" NOT NULL
);
--> statement-breakpoint
-- Already deflated by flashgate: no second compression attempt by Postgres.
ALTER TABLE "block_receipts" ALTER COLUMN "deflated" SET STORAGE EXTERNAL;
