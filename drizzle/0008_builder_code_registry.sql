CREATE TABLE "builder_code_registry_events" (
	"block_number" bigint NOT NULL,
	"log_index" integer NOT NULL,
	"block_timestamp" bigint NOT NULL,
	"token_id" "bytea" NOT NULL,
	"kind" text NOT NULL,
	"code" text,
	"account" "bytea",
	CONSTRAINT "builder_code_registry_events_block_number_log_index_pk" PRIMARY KEY("block_number","log_index")
);
