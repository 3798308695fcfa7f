ALTER TABLE "attributions" ADD COLUMN "kind" text DEFAULT 'transaction' NOT NULL;--> statement-breakpoint
ALTER TABLE "attributions" ADD COLUMN "operation_index" integer DEFAULT -1 NOT NULL;--> statement-breakpoint
ALTER TABLE "attributions" DROP CONSTRAINT "attributions_code_transaction_hash_pk";--> statement-breakpoint
ALTER TABLE "attributions" ADD CONSTRAINT "attributions_code_transaction_hash_operation_index_pk" PRIMARY KEY("code","transaction_hash","operation_index");
