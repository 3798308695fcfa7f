CREATE TABLE "account_changes" (
	"address" "bytea" NOT NULL,
	"block_number" bigint NOT NULL,
	"balance_before" numeric(78, 0) NOT NULL,
	"nonce_before" bigint NOT NULL,
	"balance" numeric(78, 0) NOT NULL,
	"nonce" bigint NOT NULL,
	CONSTRAINT "account_changes_address_block_number_pk" PRIMARY KEY("address","block_number")
);
--> statement-breakpoint
CREATE TABLE "account_reads" (
	"address" "bytea" NOT NULL,
	"block_number" bigint NOT NULL,
	"balance" numeric(78, 0) NOT NULL,
	"nonce" bigint NOT NULL,
	CONSTRAINT "account_reads_address_block_number_pk" PRIMARY KEY("address","block_number")
);
--> statement-breakpoint
CREATE TABLE "blocks" (
	"number" bigint PRIMARY KEY NOT NULL,
	"hash" "bytea" NOT NULL,
	"parent_hash" "bytea" NOT NULL,
	"timestamp" bigint NOT NULL,
	"header" json NOT NULL
);
--> statement-breakpoint
CREATE TABLE "logs" (
	"block_number" bigint NOT NULL,
	"log_index" integer NOT NULL,
	"block_hash" "bytea" NOT NULL,
	"block_timestamp" bigint NOT NULL,
	"transaction_hash" "bytea" NOT NULL,
	"transaction_index" integer NOT NULL,
	"address" "bytea" NOT NULL,
	"topic0" "bytea",
	"topic1" "bytea",
	"topic2" "bytea",
	"topic3" "bytea",
	"data" "bytea" NOT NULL,
	CONSTRAINT "logs_block_number_log_index_pk" PRIMARY KEY("block_number","log_index")
);
--> statement-breakpoint
CREATE TABLE "receipts" (
	"transaction_hash" "bytea" PRIMARY KEY NOT NULL,
	"block_number" bigint NOT NULL,
	"transaction_index" integer NOT NULL,
	"body" json NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sync_state" (
	"key" text PRIMARY KEY NOT NULL,
	"value" jsonb NOT NULL,
	"updated_at" bigint DEFAULT (extract(epoch from now()) * 1000)::bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "transactions" (
	"hash" "bytea" PRIMARY KEY NOT NULL,
	"block_number" bigint NOT NULL,
	"transaction_index" integer NOT NULL,
	"from" "bytea" NOT NULL,
	"to" "bytea",
	"body" json NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "blocks_hash_idx" ON "blocks" USING btree ("hash");--> statement-breakpoint
CREATE INDEX "logs_address_topic0_idx" ON "logs" USING btree ("address","topic0","block_number");--> statement-breakpoint
CREATE INDEX "logs_topic0_idx" ON "logs" USING btree ("topic0","block_number");--> statement-breakpoint
CREATE UNIQUE INDEX "receipts_block_idx" ON "receipts" USING btree ("block_number","transaction_index");--> statement-breakpoint
CREATE UNIQUE INDEX "transactions_block_idx" ON "transactions" USING btree ("block_number","transaction_index");