-- The primary key of `logs` belongs to each partition instead of to the parent, as its secondary indexes do
-- since 0015 (src/db/log-partitions.ts): a partition that a backfill fills far below the head is written with a
-- BRIN index on block_number alone, and its seal, which rebuilds the table, builds the primary key once, in bulk,
-- instead of every row updating a B-tree that the seal then throws away. A partition keeps its key: detached from
-- the parent, the key becomes its own; the parent's is dropped and the partitions attached again (a sealed one has
-- the CHECK of its range, so attaching it reads nothing; the others are read once).
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
	ALTER TABLE "logs" DROP CONSTRAINT IF EXISTS "logs_block_number_log_index_pk";
	FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
		EXECUTE format('ALTER TABLE "logs" ATTACH PARTITION %I %s', names[i], bounds[i]);
	END LOOP;
END
$$;
