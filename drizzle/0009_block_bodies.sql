CREATE TABLE "block_transactions" (
	"block_number" bigint PRIMARY KEY NOT NULL,
	"deflated" "bytea" NOT NULL,
	"plain_length" integer NOT NULL,
	"adler32" bigint NOT NULL,
	"segment_offsets" integer[] NOT NULL
);
--> statement-breakpoint
ALTER TABLE "transactions" ALTER COLUMN "body" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "block_receipts" ADD COLUMN "segment_offsets" integer[];--> statement-breakpoint
-- Already deflated by flashgate: no second compression attempt by Postgres, and a `substring` reads only
-- the TOAST chunks of the segment it takes.
ALTER TABLE "block_transactions" ALTER COLUMN "deflated" SET STORAGE EXTERNAL;
