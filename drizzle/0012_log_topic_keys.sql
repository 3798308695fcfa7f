-- topic1 and topic2 keyed on their last 8 bytes (src/db/log-keys.ts): they most often hold an address (a
-- Transfer's `from` and `to`), and a wallet's history (`[Transfer, null, wallet]`) is read by its key instead of
-- through every Transfer of the token. Built on every partition here (on a large index this takes a while, once).
CREATE INDEX IF NOT EXISTS "logs_topic1_idx" ON "logs" USING btree (substr("topic1", 25, 8), "block_number");--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "logs_topic2_idx" ON "logs" USING btree (substr("topic2", 25, 8), "block_number");
