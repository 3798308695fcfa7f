CREATE TABLE "log_address_postings" (
	"key" bigint NOT NULL,
	"block_number" bigint NOT NULL,
	"chunks" bigint NOT NULL,
	CONSTRAINT "log_address_postings_key_block_number_chunks_pk" PRIMARY KEY("key","block_number","chunks")
);
--> statement-breakpoint
CREATE TABLE "log_chunks" (
	"block_number" bigint NOT NULL,
	"chunk" integer NOT NULL,
	"log_count" integer NOT NULL,
	"deflated" "bytea" NOT NULL,
	CONSTRAINT "log_chunks_block_number_chunk_pk" PRIMARY KEY("block_number","chunk")
);
--> statement-breakpoint
CREATE TABLE "log_topic_postings" (
	"key" bigint NOT NULL,
	"block_number" bigint NOT NULL,
	"chunks" bigint NOT NULL,
	CONSTRAINT "log_topic_postings_key_block_number_chunks_pk" PRIMARY KEY("key","block_number","chunks")
);
--> statement-breakpoint
CREATE INDEX "log_address_postings_block_number_idx" ON "log_address_postings" USING brin ("block_number");--> statement-breakpoint
CREATE INDEX "log_topic_postings_block_number_idx" ON "log_topic_postings" USING brin ("block_number");--> statement-breakpoint
ALTER TABLE "log_chunks" ALTER COLUMN "deflated" SET STORAGE MAIN;--> statement-breakpoint
ALTER TABLE "log_chunks" SET (toast_tuple_target = 8160);
