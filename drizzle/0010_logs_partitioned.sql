-- `logs` partitioned by block range (src/db/log-partitions.ts): the ingester attaches a partition of 5,000
-- blocks ahead of the blocks it writes, the leader seals each partition the head has left (rewritten in
-- (address, topic0, block_number) order, so that a selective filter reads a few pages instead of one per
-- log), and retention drops whole partitions. The logs written before this migration stay in one partition,
-- `logs_unpartitioned`, covering every block up to the 5,000-block boundary above its newest (attaching it
-- reads the table once).
ALTER TABLE "logs" RENAME TO "logs_unpartitioned";--> statement-breakpoint
ALTER TABLE "logs_unpartitioned" RENAME CONSTRAINT "logs_block_number_log_index_pk" TO "logs_unpartitioned_pk";--> statement-breakpoint
ALTER INDEX "logs_address_topic0_idx" RENAME TO "logs_unpartitioned_address_topic0_idx";--> statement-breakpoint
ALTER INDEX "logs_topic0_idx" RENAME TO "logs_unpartitioned_topic0_idx";--> statement-breakpoint
CREATE TABLE "logs" (LIKE "logs_unpartitioned") PARTITION BY RANGE ("block_number");--> statement-breakpoint
ALTER TABLE "logs" ADD CONSTRAINT "logs_block_number_log_index_pk" PRIMARY KEY ("block_number","log_index");
--> statement-breakpoint
CREATE INDEX "logs_address_topic0_idx" ON "logs" USING btree ("address","topic0","block_number");--> statement-breakpoint
CREATE INDEX "logs_topic0_idx" ON "logs" USING btree ("topic0","block_number");--> statement-breakpoint
DO $$
DECLARE
	upper_block bigint;
BEGIN
	SELECT (max("block_number") / 5000 + 1) * 5000 INTO upper_block FROM "logs_unpartitioned";
	IF upper_block IS NULL THEN
		DROP TABLE "logs_unpartitioned";
	ELSE
		EXECUTE format('ALTER TABLE "logs" ATTACH PARTITION "logs_unpartitioned" FOR VALUES FROM (MINVALUE) TO (%s)', upper_block);
	END IF;
END
$$;
