"""The SQLite file under the blackboard: connection settings, schema migrations, transactions.

Choices, and why:
- WAL with ``synchronous=NORMAL``: a process killed at any point (kill -9) leaves every committed
  transaction in place; only an OS crash or power loss can drop the last commits (NORMAL syncs the
  WAL at checkpoints, not at each commit). That is the right trade for messages, plans and kernels,
  which the agents recreate in seconds.
- Evaluation records are the exception: the hardware took minutes to produce one and the rate
  limit may forbid producing it again soon. Their transaction runs with ``synchronous=FULL``
  (``write(conn, durable=True)``): in WAL mode SQLite then syncs the WAL to stable storage before
  COMMIT returns, so a result that was acknowledged (its message is written only after the commit)
  survives an OS crash or power loss too, as far as the disk honours fsync. The cost is one fsync
  per evaluation, a few milliseconds against minutes of hardware time.
- Every write is one short ``BEGIN IMMEDIATE`` transaction: ``busy_timeout`` does not cover a read
  that upgrades to a write inside a deferred transaction, while an immediate one waits properly
  for the writer lock (docs/stack-pitfalls.md).
- Calls are synchronous and run inline on the event loop's thread. They take microseconds to a few
  milliseconds, and keeping them off worker threads is what lets a campaign run on trio's
  MockClock (a task awaiting a thread counts as idle and the virtual clock would jump). The same
  code therefore runs under trio and asyncio; aiosqlite needs asyncio and was not used.
- Each row keeps the whole record as a msgspec-encoded JSON ``body``; the few other columns exist
  for indexes and constraints only and are written from the same Struct, so the Struct is the one
  schema.
- Commands that only read (status, logs, watch, export, report) open the file read-only and check
  first that it is a blackboard (``inspect``): pointed at another program's database, an empty
  file or a typo, they say so and change nothing, not even by creating the WAL's side files. A
  read-only connection to a WAL database creates ``-wal`` and ``-shm`` when they are missing and
  cannot delete them on close, so when no ``-wal`` file exists (no writer is running and none
  died mid-write) the file is opened ``immutable``, which reads it as a plain file; a follower
  reopens it as an ordinary read-only connection when a writer appears (``Blackboard.data_version``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA_VERSION = 3
SQLITE_HEADER = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


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
    # version 2 -> 3: a kernel that does not compile is a build failure, not evidence against its
    # idea: the verdict "build_failed" replaces the "refuted" that earlier versions recorded for it.
    # (An older kernel-scientist cannot decode the new verdict, hence the version step.)
    3: """
    UPDATE hypothesis
    SET body = CAST(json_set(CAST(body AS TEXT), '$.verdict', 'build_failed') AS BLOB)
    WHERE json_extract(CAST(body AS TEXT), '$.verdict') = 'refuted'
      AND json_extract(CAST(body AS TEXT), '$.kernel_id') IN (
          SELECT kernel_id FROM evaluation
          WHERE json_extract(CAST(body AS TEXT), '$.report.outcome') = 'compile_error');
    """,
}
# The tables each schema version has (what ``inspect`` expects of a file that claims it).
_TABLES = {
    1: {"campaign", "kernel", "selection", "hypothesis", "review", "submission", "evaluation", "message", "finding"}
}
_TABLES[2] = _TABLES[1] | {"llm_call"}
_TABLES[3] = _TABLES[2]


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


def inspect(path: Path) -> int:
    """Check, without writing a byte or creating a file, that ``path`` is a kernel-scientist
    blackboard this version can open; return its schema version. Raises BlackboardError with one
    line saying what the file is instead."""
    if not path.exists():
        raise BlackboardError(f"{path}: no such blackboard file")
    if not path.is_file():
        raise BlackboardError(f"{path}: is a folder, not a blackboard file")
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise BlackboardError(f"{path}: cannot read ({exc.strerror})") from exc
    if not header:
        raise BlackboardError(f"{path}: an empty file, not a kernel-scientist blackboard")
    if header.startswith(GZIP_MAGIC):  # how blackboards are kept beside results (docs/results/)
        raise BlackboardError(f"{path}: a gzip file; unpack it first (gunzip -k {path}) and open the .sqlite")
    if header != SQLITE_HEADER:
        raise BlackboardError(f"{path}: not an SQLite file, so not a kernel-scientist blackboard")
    conn, _ = _open_readonly(path)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise BlackboardError(f"{path}: not a usable SQLite file ({exc})") from exc
    finally:
        conn.close()
    if version > SCHEMA_VERSION:
        raise BlackboardError(
            f"{path}: schema version {version} is newer than this kernel-scientist understands "
            f"({SCHEMA_VERSION}); upgrade kernel-scientist to open it"
        )
    if version < 1 or not _TABLES[version] <= tables:
        what = (
            f"its tables: {', '.join(sorted(tables)[:4])}{', ...' if len(tables) > 4 else ''}"
            if tables
            else "no tables"
        )
        raise BlackboardError(f"{path}: an SQLite database ({what}), not a kernel-scientist blackboard")
    return version


def _open_readonly(path: Path) -> tuple[sqlite3.Connection, bool]:
    """A connection that can neither write the file nor create files beside it (module note),
    and whether it is a snapshot (``immutable``: it will not see later commits)."""
    snapshot = not path.with_name(path.name + "-wal").exists()
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if snapshot else "")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10.0, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=10000")
    except sqlite3.DatabaseError as exc:
        raise BlackboardError(f"{path}: cannot open read-only ({exc})") from exc
    return conn, snapshot


def connect_readonly(path: Path) -> tuple[sqlite3.Connection, bool]:
    """Open an existing blackboard for reading only; see ``_open_readonly``. A file of an older
    schema is read as it is (it cannot be migrated without writing) when it has today's tables."""
    version = inspect(path)
    if _TABLES[version] != _TABLES[SCHEMA_VERSION]:
        raise BlackboardError(
            f"{path}: written by an older kernel-scientist (schema {version}, this "
            f"one reads {min(v for v in _TABLES if _TABLES[v] == _TABLES[SCHEMA_VERSION])}"
            f" to {SCHEMA_VERSION})"
        )
    return _open_readonly(path)


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the file to SCHEMA_VERSION, one transaction per step; fail loudly, never half-way."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise BlackboardError(
            f"{path}: schema version {version} is newer than this kernel-scientist understands "
            f"({SCHEMA_VERSION}); upgrade kernel-scientist to open it"
        )
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
def write(conn: sqlite3.Connection, durable: bool = False) -> Iterator[sqlite3.Connection]:
    """One short write transaction that takes the writer lock up front; ``durable``: synced to
    stable storage before it returns (module note; the pragma cannot change inside a transaction)."""
    if durable:
        conn.execute("PRAGMA synchronous=FULL")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        if durable:
            conn.execute("PRAGMA synchronous=NORMAL")
