"""The SQLite file under the blackboard: connection settings, schema migrations, transactions.

Choices, and why:
- WAL with ``synchronous=NORMAL``: a process killed at any point (kill -9) leaves every committed
  transaction in place; only an OS crash or power loss can drop the last commits.
- Every write is one short ``BEGIN IMMEDIATE`` transaction: ``busy_timeout`` does not cover a read
  that upgrades to a write inside a deferred transaction, while an immediate one waits properly
  for the writer lock (facts/stack-notes.md).
- Calls are synchronous and run inline on the event loop's thread. They take microseconds to a few
  milliseconds, and keeping them off worker threads is what lets a campaign run on trio's
  MockClock (a task awaiting a thread counts as idle and the virtual clock would jump). The same
  code therefore runs under trio and asyncio; aiosqlite needs asyncio and was not used.
- Each row keeps the whole record as a msgspec-encoded JSON ``body``; the few other columns exist
  for indexes and constraints only and are written from the same Struct, so the Struct is the one
  schema.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

SCHEMA_VERSION = 2


class BlackboardError(Exception):
    """A blackboard file that cannot be opened, is too new, or fails a migration."""


_MIGRATIONS: dict[int, str] = {
    # version 0 -> 1: the first schema.
    1: """
    CREATE TABLE campaign (id INTEGER PRIMARY KEY CHECK (id = 1), body BLOB NOT NULL);
    CREATE TABLE kernel (
        id INTEGER PRIMARY KEY, state TEXT NOT NULL, source_hash TEXT NOT NULL, body BLOB NOT NULL);
    CREATE INDEX kernel_state ON kernel(state);
    CREATE INDEX kernel_hash ON kernel(source_hash);
    CREATE TABLE selection (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
    CREATE TABLE hypothesis (
        id INTEGER PRIMARY KEY, state TEXT NOT NULL, selection_id INTEGER NOT NULL,
        body BLOB NOT NULL);
    CREATE INDEX hypothesis_state ON hypothesis(state);
    CREATE TABLE review (
        id INTEGER PRIMARY KEY, kernel_id INTEGER NOT NULL REFERENCES kernel(id),
        body BLOB NOT NULL);
    CREATE INDEX review_kernel ON review(kernel_id);
    CREATE TABLE submission (
        id INTEGER PRIMARY KEY, kernel_id INTEGER NOT NULL UNIQUE REFERENCES kernel(id),
        state TEXT NOT NULL, expected_value REAL NOT NULL, body BLOB NOT NULL);
    CREATE INDEX submission_state ON submission(state, expected_value);
    CREATE TABLE evaluation (
        id INTEGER PRIMARY KEY, kernel_id INTEGER NOT NULL UNIQUE REFERENCES kernel(id),
        submission_id INTEGER NOT NULL UNIQUE REFERENCES submission(id), body BLOB NOT NULL);
    CREATE TABLE message (
        id INTEGER PRIMARY KEY, agent TEXT NOT NULL, kind TEXT NOT NULL, body BLOB NOT NULL);
    CREATE INDEX message_agent ON message(agent);
    CREATE TABLE finding (id INTEGER PRIMARY KEY, technique TEXT NOT NULL, body BLOB NOT NULL);
    """,
    # version 1 -> 2: every exchange with a language model (record, replay and accounting).
    2: """
    CREATE TABLE llm_call (
        id INTEGER PRIMARY KEY, agent TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL,
        UNIQUE (agent, seq));
    """,
}


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the blackboard file at ``path``."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=10.0, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=10000")
    except sqlite3.DatabaseError as exc:
        raise BlackboardError(f"{path}: not a usable SQLite blackboard ({exc})") from exc
    migrate(conn, path)
    return conn


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the file to SCHEMA_VERSION, one transaction per step; fail loudly, never half-way."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise BlackboardError(
            f"{path}: schema version {version} is newer than this kernel-scientist understands "
            f"({SCHEMA_VERSION}); upgrade kernel-scientist to open it")
    for target in range(version + 1, SCHEMA_VERSION + 1):
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _MIGRATIONS[target].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise BlackboardError(f"{path}: migration to schema {target} failed: {exc}") from exc


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One short write transaction that takes the writer lock up front."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
