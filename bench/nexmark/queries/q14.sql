-- Nexmark q14 for Cairn: nexmark-flink's queries/q14.sql (github.com/nexmark/nexmark,
-- Apache License 2.0), after the shared source table and views of bench/nexmark/ddl.sql (-i).
-- Adapted: CREATE FUNCTION names Cairn's Python port of nexmark-flink's Java CountChar
-- (cairn.table.nexmark_functions.CountChar, LANGUAGE PYTHON): Cairn runs Python functions,
-- and Flink's syntax needs the language of a non-Java function.
-- Run: cairn sql -i bench/nexmark/ddl.sql -f bench/nexmark/queries/q14.sql --executor inprocess
-- Status in Cairn: docs/nexmark.md.

-- -------------------------------------------------------------------------------------------------
-- Query 14: Calculation (Not in original suite)
-- -------------------------------------------------------------------------------------------------
-- Convert bid timestamp into types and find bids with specific price.
-- Illustrates duplicate expressions and usage of user-defined-functions.
-- -------------------------------------------------------------------------------------------------

CREATE FUNCTION count_char AS 'cairn.table.nexmark_functions.CountChar' LANGUAGE PYTHON;

CREATE TABLE nexmark_q14 (
    auction BIGINT,
    bidder BIGINT,
    price  DECIMAL(23, 3),
    bidTimeType VARCHAR,
    `dateTime` TIMESTAMP(3),
    extra VARCHAR,
    c_counts BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q14
SELECT 
    auction,
    bidder,
    0.908 * price as price,
    CASE
        WHEN HOUR(`dateTime`) >= 8 AND HOUR(`dateTime`) <= 18 THEN 'dayTime'
        WHEN HOUR(`dateTime`) <= 6 OR HOUR(`dateTime`) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bidTimeType,
    `dateTime`,
    extra,
    count_char(extra, 'c') AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
