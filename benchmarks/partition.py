"""Does partitioning ``search_entries`` by session hash help at the scale this machine runs?
(docs/postgres.md, "Partitioning: measured, not done").

Two copies of the search table's shape (session id, seq, time, folded text, its
``tsvector``, the owner) with the same rows, one plain, one ``PARTITION BY HASH
(session_id)`` into ``--parts`` partitions, each with the store's indexes (primary key,
trigram, ``tsvector``, newest first, owner). Timed on each, median of ``--repeat`` runs:

* ``frequent``: a word in half the rows, the newest 5,001 matches (the early stop of
  docs/search.md);
* ``rare``: a word in one row in 10,000, through the trigram index;
* ``session``: one session's rows by primary key (what a write and ``show`` touch);
* ``member``: a frequent word among one owner's rows (row-level security's filter);
* ``insert``: 2,000 rows of new sessions, one transaction;
* the tables' size.

Usage::

    python benchmarks/partition.py --rows 500000 --parts 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests")]

_COLUMNS = """(
    session_id text NOT NULL, seq integer NOT NULL, ts_ms double precision, owner text NOT NULL,
    folded text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, left(folded, 100000))) STORED,
    PRIMARY KEY (session_id, seq))"""

# Rows of sessions of 1,000 entries, 20 owners, one a second; "common" in every other
# row, "rareword<n>" in one row in 10,000.
_FILL = """
INSERT INTO {table} (session_id, seq, ts_ms, owner, folded)
SELECT 'sess-' || (i / 1000), i % 1000, 1767261600000 + i * 1000.0, 'h' || lpad(((i / 1000) % 20)::text, 2, '0'),
       'question ' || i || CASE WHEN i % 2 = 0 THEN ' common words about advisory locks' ELSE ' other text' END
       || CASE WHEN i % 10000 = 7 THEN ' rareword' || i ELSE '' END
FROM generate_series({start}, {stop} - 1) AS i"""

_INDEXES = """
CREATE INDEX {table}_trgm ON {table} USING gin (folded gin_trgm_ops);
CREATE INDEX {table}_tsv ON {table} USING gin (tsv);
CREATE INDEX {table}_recent ON {table} ((coalesce(ts_ms, 0)) DESC);
CREATE INDEX {table}_owner ON {table} (owner)"""

_QUERIES = {
    "frequent": "SELECT session_id, seq FROM {table} WHERE strpos(folded, 'common') > 0"
                " ORDER BY coalesce(ts_ms, 0) DESC LIMIT 5001",
    "rare": "SELECT session_id, seq FROM {table} WHERE folded LIKE '%rareword{rare}%'",
    "session": "SELECT seq, folded FROM {table} WHERE session_id = 'sess-{session}' ORDER BY seq",
    "member": "SELECT session_id, seq FROM {table} WHERE owner = 'h03' AND strpos(folded, 'common') > 0"
              " ORDER BY coalesce(ts_ms, 0) DESC LIMIT 5001",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import psycopg

    import pg

    cluster = pg.start_cluster()
    try:
        url = cluster.url(cluster.new_database("part"))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            conn.execute(f"CREATE TABLE plain {_COLUMNS}")
            conn.execute(f"CREATE TABLE part {_COLUMNS} PARTITION BY HASH (session_id)")
            for n in range(args.parts):
                conn.execute(f"CREATE TABLE part_{n} PARTITION OF part"
                             f" FOR VALUES WITH (MODULUS {args.parts}, REMAINDER {n})")
            for table in ("plain", "part"):
                start = time.perf_counter()
                conn.execute(_FILL.format(table=table, start=0, stop=args.rows))
                for statement in _INDEXES.format(table=table).split(";"):
                    conn.execute(statement)
                conn.execute(f"VACUUM ANALYZE {table}")
                print(f"{table}: filled and indexed {args.rows:,} rows in {time.perf_counter() - start:.0f} s")
            results: dict[str, dict[str, float]] = {"plain": {}, "part": {}}
            for name, sql in _QUERIES.items():
                for table in ("plain", "part"):
                    times = []
                    for r in range(args.repeat):
                        text = sql.format(table=table, rare=(r * 10_000 + 7) % args.rows,
                                          session=(r * 37) % max(1, args.rows // 1000))
                        start = time.perf_counter()
                        conn.execute(text).fetchall()
                        times.append(time.perf_counter() - start)
                    results[table][name] = statistics.median(times)
            for table in ("plain", "part"):
                times = []
                for r in range(3):
                    first = args.rows + (r + (0 if table == "plain" else 3)) * 2_000
                    start = time.perf_counter()
                    conn.execute(_FILL.format(table=table, start=first, stop=first + 2_000))
                    times.append(time.perf_counter() - start)
                results[table]["insert"] = statistics.median(times)
                results[table]["bytes"] = conn.execute(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c"
                    " WHERE c.relkind = 'r' AND (c.relname = %s OR c.relname LIKE %s)",
                    (table, f"{table}\\_%")).fetchone()[0]
        print(f"{args.rows:,} rows, {args.parts} hash partitions by session; median of {args.repeat} (ms)")
        print(f"{'':10} {'plain':>10} {'partitioned':>12}")
        for name in (*_QUERIES, "insert"):
            print(f"{name:10} {results['plain'][name] * 1000:10.1f} {results['part'][name] * 1000:12.1f}")
        print(f"{'size MiB':10} {results['plain']['bytes'] / 2**20:10.0f} {results['part']['bytes'] / 2**20:12.0f}")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
