-- Nexmark q1 for Cairn: nexmark-flink's queries/q1.sql (github.com/nexmark/nexmark,
-- Apache License 2.0), after the shared source table and views of bench/nexmark/ddl.sql (-i).
-- Adapted: nothing.
-- Run: cairn sql -i bench/nexmark/ddl.sql -f bench/nexmark/queries/q1.sql --executor inprocess
-- Status in Cairn: docs/nexmark.md.

-- -------------------------------------------------------------------------------------------------
-- Query1: Currency conversion
-- -------------------------------------------------------------------------------------------------
-- Convert each bid value from dollars to euros. Illustrates a simple transformation.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_q1 (
  auction  BIGINT,
  bidder  BIGINT,
  price  DECIMAL(23, 3),
  `dateTime`  TIMESTAMP(3),
  extra  VARCHAR
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q1
SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    `dateTime`,
    extra
FROM bid;
