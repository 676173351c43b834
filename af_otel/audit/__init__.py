"""``af-otel audit``: every LLM call of a time window, read from ClickHouse and verified run by run.

The ``audit`` extra (chDB, clickhouse-connect, rich) is imported only where a connection is made
or progress is shown: these modules import without it, and the core package never imports them.
`clickhouse` reads the Collector exporter's ``otel_traces`` table (one query, streamed by run),
`rows` turns its rows back into span records, `inputs` tells span files apart (`files`: OTLP
JSON lines and protobuf; `tempo`: Tempo blocks; Parquet; an awss3exporter prefix), `calls`
verifies each run with the reader, `results` writes one row a call into ClickHouse, `summary` counts what was found.
"""
