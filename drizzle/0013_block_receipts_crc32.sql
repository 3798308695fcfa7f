-- CRC-32 of each block's receipts JSON (src/codecs/deflated.ts), so that the stored stream also goes as it is,
-- in a gzip member, to a client accepting only gzip (ethers, Go's net/http). Null for rows written before: their
-- answers are compressed per request for such a client, as before. Adding a nullable column rewrites nothing.
ALTER TABLE "block_receipts" ADD COLUMN IF NOT EXISTS "crc32" bigint;
