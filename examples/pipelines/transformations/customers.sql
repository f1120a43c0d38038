-- The customers bucket as a table (SCD type 1): each key's latest revision,
-- deleted and purged keys left out. On a catalog whose tables support MERGE
-- (Delta, Iceberg), dp.create_auto_cdc_flow does this incrementally; the
-- parquet tables of the open-source default catalog do not (see docs/spark.md).
CREATE MATERIALIZED VIEW customers AS
SELECT key, CAST(value AS STRING) AS value, revision, created
FROM (
  SELECT *, row_number() OVER (PARTITION BY key ORDER BY revision DESC) AS latest
  FROM customer_changes
)
WHERE latest = 1 AND operation = 'PUT'
