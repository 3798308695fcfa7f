CREATE TABLE "attributions" (
	"code" text NOT NULL,
	"transaction_hash" "bytea" NOT NULL,
	"block_number" bigint NOT NULL,
	"block_timestamp" bigint NOT NULL,
	"transaction_index" integer NOT NULL,
	"sender" "bytea" NOT NULL,
	"target" "bytea",
	"gas_used" bigint NOT NULL,
	"suffix_gas" integer NOT NULL,
	"value" numeric(78, 0) NOT NULL,
	CONSTRAINT "attributions_code_transaction_hash_pk" PRIMARY KEY("code","transaction_hash")
);
--> statement-breakpoint
CREATE TABLE "builder_codes" (
	"code" text PRIMARY KEY NOT NULL,
	"wallet" "bytea" NOT NULL,
	"created_at" bigint DEFAULT (extract(epoch from now()) * 1000)::bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "attributions_code_time_idx" ON "attributions" USING btree ("code","block_timestamp");--> statement-breakpoint
CREATE INDEX "attributions_block_idx" ON "attributions" USING btree ("block_number");--> statement-breakpoint
CREATE UNIQUE INDEX "builder_codes_wallet_idx" ON "builder_codes" USING btree ("wallet");