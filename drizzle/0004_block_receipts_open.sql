ALTER TABLE "block_receipts" ADD COLUMN "plain_length" integer;--> statement-breakpoint
ALTER TABLE "block_receipts" ADD COLUMN "adler32" bigint;