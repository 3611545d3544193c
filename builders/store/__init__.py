"""The span store: one DuckDB schema for every corpus and benchmark (`db`), the ingestion write
path (`writer`) and where a source is read from (`ingest`)."""

from builders.store.db import DB_ENV, DEFAULT_DB, Store, default_db_path

__all__ = ["DB_ENV", "DEFAULT_DB", "Store", "default_db_path"]
