-- The secondary indexes of `logs` belong to each partition instead of to the parent (src/db/log-partitions.ts):
-- a partition that a backfill fills far below the head is written without them, and sealing builds them once,
-- in bulk, instead of every row updating four B-trees that the seal then rebuilds. A partition's existing
-- indexes are kept: detached from the parent, it keeps them as its own; the parent's indexes, then without
-- partitions, are dropped and the partitions attached again (a sealed one has the CHECK of its range, so
-- attaching it reads nothing; the others are read once).
DO $$
DECLARE
	part record;
	names text[] := '{}';
	bounds text[] := '{}';
BEGIN
	FOR part IN
		SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'logs'::regclass
	LOOP
		EXECUTE format('ALTER TABLE "logs" DETACH PARTITION %I', part.name);
		names := names || part.name::text;
		bounds := bounds || part.bound;
	END LOOP;
	DROP INDEX IF EXISTS "logs_address_topic0_idx";
	DROP INDEX IF EXISTS "logs_topic0_idx";
	DROP INDEX IF EXISTS "logs_topic1_idx";
	DROP INDEX IF EXISTS "logs_topic2_idx";
	FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
		EXECUTE format('ALTER TABLE "logs" ATTACH PARTITION %I %s', names[i], bounds[i]);
	END LOOP;
END
$$;
