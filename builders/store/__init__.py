"""The span store: one DuckDB schema for every corpus and benchmark (`db`), the ingestion write
path (`writer`) and where a source is read from (`ingest`). DuckDB's errors leave it as typed
`builders.errors.StoreError`s (`store_errors`, `as_store_error`)."""

from builders.store.db import DB_ENV, DEFAULT_DB, Store, default_db_path
from builders.store.failures import as_store_error, store_errors, wal_holds_writes, wal_path

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "Store",
    "as_store_error",
    "default_db_path",
    "store_errors",
    "wal_holds_writes",
    "wal_path",
]
