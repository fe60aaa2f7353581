"""The PostgreSQL side of storage: its migration runner and the one-shot copy from SQLite.

The schema lives in `migrations/postgres/`, one file per SQLite migration with the same name,
tables, columns and indexes, so the application's SQL runs on both engines.
"""
