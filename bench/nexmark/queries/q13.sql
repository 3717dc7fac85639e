-- Nexmark q13 for Cairn: nexmark-flink's queries/q13.sql (github.com/nexmark/nexmark,
-- Apache License 2.0), after the shared source table and views of bench/nexmark/ddl.sql (-i).
-- Adapted: the side input: nexmark-flink's legacy 'connector.type' = 'filesystem' options (its own
-- note asks for the new connector) as 'connector' = 'filesystem' with 'path' and 'format', and
-- ${FLINK_HOME}/data/side_input.txt as /tmp/nexmark/side_input.txt (nexmark-flink's
-- side_input_gen.sh writes it: lines 'key,value' for keys 0..9999).
-- Run: cairn sql -i bench/nexmark/ddl.sql -f bench/nexmark/queries/q13.sql --executor inprocess
-- Status in Cairn: docs/nexmark.md.

-- -------------------------------------------------------------------------------------------------
-- Query 13: Bounded Side Input Join (Not in original suite)
-- -------------------------------------------------------------------------------------------------
-- Joins a stream to a bounded side input, modeling basic stream enrichment.
-- -------------------------------------------------------------------------------------------------

-- (nexmark-flink's note: use the new "filesystem" connector once FLINK-17397 is done)
CREATE TABLE side_input (
  key BIGINT,
  `value` VARCHAR
) WITH (
  'connector' = 'filesystem',
  'path' = 'file:///tmp/nexmark/side_input.txt',
  'format' = 'csv'
);

CREATE TABLE nexmark_q13 (
  auction  BIGINT,
  bidder  BIGINT,
  price  BIGINT,
  `dateTime`  TIMESTAMP(3),
  `value`  VARCHAR
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q13
SELECT
    B.auction,
    B.bidder,
    B.price,
    B.`dateTime`,
    S.`value`
FROM (SELECT *, PROCTIME() as p_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
ON mod(B.auction, 10000) = S.key;
