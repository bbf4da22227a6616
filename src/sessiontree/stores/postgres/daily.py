"""The per-user daily usage rollup (schema step ``m012_usage_daily``; docs/postgres.md,
"Per-user daily rollup"): what the lead's aggregates by user read instead of every
session's rollup rows.

``usage_daily`` holds one row per (owner, UTC day, provider, model, agent, project)
with the sums of the ``usage_rollup`` rows (:mod:`.usage`) of that owner's sessions:
calls, tokens and recorded cost, nothing else (no text, title or path: the project is
the last component of the session's cwd, as the aggregate views show it). At
10,000,000 entries the rollup held 96,000 rows for 22,000 such groups, and real data,
whose sessions do not each spread over many days, collapses further.

It is kept on the rollup's own write path by triggers, so every way a rollup row
changes moves the daily sums with it, in the same transaction:

* ``usage_rollup`` rows carry their session's ``agent`` (from ``provenance``) and
  ``project`` (from ``sessions.cwd``), filled when the row is inserted;
* every insert, update and delete of a rollup row adds its sums to (and takes its old
  sums from) its daily row (``usage_daily_move``): ``usage_settle``'s upserts, a key
  becoming shared, a session deleted (cascade) or pruned, a session handed to another
  owner (its rollup rows' ``owner`` moves), ``reindex``;
* provenance written after the session's calls (``sync`` records it in the same commit,
  ``import`` right after) and a header rewrite changing the cwd update the session's
  rollup rows' ``agent`` / ``project``, which moves their sums.

The daily rows of one owner are written by that owner's writers only; two of them
(one person syncing from two hosts) take turns on a transaction-level advisory lock
per owner, taken by ``usage_settle`` before its per-key locks (and by the trigger for
the other writes), so their upserts of the same daily rows cannot deadlock.

Under row-level security a member reads their own daily rows (``owner``); nobody but
the tables' owner writes them (the trigger functions run with its rights, and members
have no grant but ``SELECT``). ``team_usage_by_user`` (and ``team_usage``) read these
rows plus the shared ledger rows (de-duplicated within a user as before): the same rows
as step ``m011_owner_recent``'s view (``tests/stores/test_team_daily.py`` compares them).

Every function here takes an open connection inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DAILY_LOCK_CLASS", "DAILY_STEP", "m012_usage_daily", "rebuild_daily", "usage_by_user_view"]

#: The schema step creating ``usage_daily``.
DAILY_STEP = "m012_usage_daily"

#: Class id of the advisory lock per owner (the object id is ``hashtext(owner)``); apart
#: from :data:`~sessiontree.stores.postgres.usage.SETTLE_LOCK_CLASS` and the schema lock.
DAILY_LOCK_CLASS = 0x5E56

_DAY_MS = 86_400_000

#: A session's project as the aggregate views show it (team.py's ``_PROJECT``).
_PROJECT = "regexp_replace(rtrim(coalesce(s.cwd, ''), '/'), '^.*/', '')"

_SUMS = ("calls", "input", "output", "cache_read", "cache_write", "cost_nanos", "cache_write_1h")
_KEY = ("owner", "day_ms", "provider", "model", "agent", "project")

_TABLE = """
CREATE TABLE usage_daily (
    -- The sessions' owner (row-level security, docs/team.md).
    owner text NOT NULL,
    -- Start of the UTC day, Unix ms (floored).
    day_ms bigint NOT NULL,
    -- '' for a provider or model not recorded (as usage_rollup).
    provider text NOT NULL,
    model text NOT NULL,
    -- The sessions' agent (provenance) and project (last component of the cwd), or ''.
    agent text NOT NULL,
    project text NOT NULL,
    -- Sums of the owner's usage_rollup rows with this key.
    calls numeric NOT NULL,
    input numeric NOT NULL,
    output numeric NOT NULL,
    cache_read numeric NOT NULL,
    cache_write numeric NOT NULL,
    cost_nanos numeric NOT NULL,
    cache_write_1h numeric NOT NULL,
    PRIMARY KEY (owner, day_ms, provider, model, agent, project)
)"""


def _floor(row: str) -> str:
    """The start of the UTC day of ``row``'s bucket (floored, also before 1970)."""
    return f"({row}.bucket - (({row}.bucket % {_DAY_MS}) + {_DAY_MS}) % {_DAY_MS})"


def _upsert(sign: str, row: str) -> str:
    """PL/pgSQL adding (``+``) or taking out (``-``) the sums of the trigger's ``row``
    (``NEW`` or ``OLD``) to or from its daily row."""
    values = ", ".join([f"{row}.owner", _floor(row), *(f"{row}.{k}" for k in _KEY[2:]),
                        *(f"{sign}{row}.{k}" for k in _SUMS)])
    updates = ", ".join(f"{k} = usage_daily.{k} + excluded.{k}" for k in _SUMS)
    return (f"INSERT INTO usage_daily ({', '.join(_KEY + _SUMS)}) VALUES ({values})"
            f" ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {updates};")


_LOCK = f"PERFORM pg_advisory_xact_lock({DAILY_LOCK_CLASS}, hashtext(%s));"

_MOVE = f"""
CREATE OR REPLACE FUNCTION usage_daily_move() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {{schema}}, pg_temp AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        {_LOCK % "OLD.owner"}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {_LOCK % "NEW.owner"}
    END IF;
    IF TG_OP = 'UPDATE' AND (OLD.owner, {_floor("OLD")}, OLD.provider, OLD.model, OLD.agent, OLD.project)
                            IS NOT DISTINCT FROM
                            (NEW.owner, {_floor("NEW")}, NEW.provider, NEW.model, NEW.agent, NEW.project) THEN
        -- The common case (usage_settle's upsert): one daily row, by the difference.
        INSERT INTO usage_daily ({", ".join(_KEY + _SUMS)})
        VALUES (NEW.owner, {_floor("NEW")}, NEW.provider,
                NEW.model, NEW.agent, NEW.project, {", ".join(f"NEW.{k} - OLD.{k}" for k in _SUMS)})
        ON CONFLICT ({", ".join(_KEY)}) DO UPDATE SET
            {", ".join(f"{k} = usage_daily.{k} + excluded.{k}" for k in _SUMS)};
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        {_upsert("-", "OLD")}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {_upsert("", "NEW")}
    END IF;
    RETURN NULL;
END $$"""

# A rollup row takes its session's agent and project when inserted.
_ATTRS = f"""
CREATE OR REPLACE FUNCTION usage_rollup_attrs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {{schema}}, pg_temp AS $$
BEGIN
    SELECT coalesce((SELECT p.agent FROM provenance AS p WHERE p.session_id = NEW.session_id), ''),
           coalesce((SELECT {_PROJECT} FROM sessions AS s WHERE s.id = NEW.session_id), '')
      INTO NEW.agent, NEW.project;
    RETURN NEW;
END $$"""

# A session's provenance or cwd changed: its rollup rows follow (usage_daily_move moves the sums).
_PROVENANCE_CHANGED = """
CREATE OR REPLACE FUNCTION usage_daily_provenance() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE usage_rollup SET agent = coalesce((SELECT p.agent FROM provenance AS p
                                                  WHERE p.session_id = OLD.session_id), '')
        WHERE session_id = OLD.session_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        UPDATE usage_rollup SET agent = NEW.agent WHERE session_id = NEW.session_id AND agent <> NEW.agent;
    END IF;
    RETURN NULL;
END $$"""

_CWD_CHANGED = f"""
CREATE OR REPLACE FUNCTION usage_daily_cwd() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {{schema}}, pg_temp AS $$
BEGIN
    UPDATE usage_rollup SET project = (SELECT {_PROJECT} FROM sessions AS s WHERE s.id = NEW.id)
    WHERE session_id = NEW.id;
    RETURN NULL;
END $$"""

_FUNCTIONS = ("usage_daily_move()", "usage_rollup_attrs()", "usage_daily_provenance()", "usage_daily_cwd()")


def _settle_with_owner_lock(schema: str) -> str:
    """``usage_settle`` (:mod:`.usage`) taking the owner's lock (:data:`DAILY_LOCK_CLASS`)
    after its permission check and before its per-key locks."""
    from sessiontree.stores.postgres.usage import _SETTLE

    anchor = "    END IF;\n    PERFORM pg_advisory_xact_lock("
    if _SETTLE.count(anchor) != 1:
        raise AssertionError("usage_settle changed: its lock anchor not found once")
    lock = _LOCK % "(SELECT owner FROM sessions WHERE id = p_session)"
    return _SETTLE.format(schema=schema).replace(anchor, f"    END IF;\n    {lock}\n    PERFORM pg_advisory_xact_lock(")


def usage_by_user_view() -> str:
    """``team_usage_by_user`` reading ``usage_daily`` for the rolled calls (instead of
    summing ``usage_rollup`` per session, :func:`.recent.usage_by_user_view`) and the
    shared ledger rows de-duplicated within a user as before, grouped on their own (few
    rows), the two joined on the whole key (``FULL JOIN``; a daily row is one key
    already): the same rows. A daily row whose calls are 0 (all taken out) has every
    sum 0, as its rollup rows had, and is left out as they were. Regrouping the union
    instead (as before) hashed every daily row again, spilling to disk at 15,000 rows."""
    from sessiontree.stores.postgres.team import _USAGE_BY_USER_ROLLUP

    _head, sep, rest = _USAGE_BY_USER_ROLLUP.partition("    UNION ALL\n")
    shared, end, _tail = rest.partition("\n) AS parts")
    if not sep or not end or "WHERE l.shared" not in shared:
        raise AssertionError("team_usage_by_user changed: its parts not found")
    key = ("user_name", "day", "provider", "model", "agent", "project")
    sums = ("calls", "input", "output", "cache_read", "cache_write", "cost_nanos")
    columns = ", ".join(f"coalesce(d.{k}, x.{k}) AS {k}" for k in key)
    totals = ", ".join(f"coalesce(d.{k}, 0) + coalesce(x.{k}, 0) AS {k}" if k != "calls" else
                       f"(coalesce(d.{k}, 0) + coalesce(x.{k}, 0))::bigint AS {k}" for k in sums)
    on = " AND ".join(f"x.{k} = d.{k}" for k in key)
    return f"""
CREATE OR REPLACE VIEW team_usage_by_user WITH (security_barrier) AS
SELECT {columns}, {totals}
FROM (
    SELECT d.owner AS user_name,
           to_char(to_timestamp(d.day_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
           d.provider, d.model, d.agent, d.project,
           d.calls, d.input, d.output, d.cache_read, d.cache_write, d.cost_nanos
    FROM usage_daily AS d WHERE d.calls <> 0
) AS d FULL JOIN (
    SELECT {", ".join(key)}, {", ".join(f"sum({k}) AS {k}" for k in sums)}
    FROM (
{shared}
    ) AS shared ({", ".join(key + sums)})
    GROUP BY {", ".join(key)}
) AS x ON {on}"""


def rebuild_daily(conn: Any) -> None:
    """Recompute the rollup rows' ``agent`` and ``project`` and every ``usage_daily`` row
    from ``usage_rollup`` (the schema step; and a bulk copy made with triggers off, as
    ``benchmarks/team.py --bulk`` makes). Run by the tables' owner."""
    conn.execute(f"""
        UPDATE usage_rollup AS r SET agent = coalesce(p.agent, ''), project = {_PROJECT}
        FROM sessions AS s LEFT JOIN provenance AS p ON p.session_id = s.id
        WHERE s.id = r.session_id AND (r.agent, r.project) IS DISTINCT FROM (coalesce(p.agent, ''), {_PROJECT})""")
    conn.execute("DELETE FROM usage_daily")
    conn.execute(f"""
        INSERT INTO usage_daily ({", ".join(_KEY + _SUMS)})
        SELECT owner, {_floor("usage_rollup")}, provider, model, agent, project, {", ".join(f"sum({k})" for k in _SUMS)}
        FROM usage_rollup GROUP BY 1, 2, 3, 4, 5, 6""")
    # A new table has no statistics: the view's grouping would be planned for a few
    # hundred rows and spill to disk (measured at 2,000,000 entries: 5 batches).
    conn.execute("ANALYZE usage_daily")


def m012_usage_daily(conn: Any) -> None:
    """Schema step ``m012_usage_daily`` (see the module): ``usage_rollup.agent`` and
    ``.project``, the ``usage_daily`` table under row-level security (own rows), filled
    from the rollup; the triggers keeping it; ``usage_settle`` taking the owner's lock;
    ``team_usage_by_user`` reading it (:func:`usage_by_user_view`); the grants
    (:func:`~sessiontree.stores.postgres.team.grant_team`: members ``SELECT`` their own
    daily rows; nobody but the tables' owner writes them)."""
    from sessiontree.stores.postgres.recent import CURRENT_OWNER
    from sessiontree.stores.postgres.team import grant_team

    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    conn.execute("ALTER TABLE usage_rollup ADD COLUMN IF NOT EXISTS agent text NOT NULL DEFAULT '',"
                 " ADD COLUMN IF NOT EXISTS project text NOT NULL DEFAULT ''")
    conn.execute("DROP TABLE IF EXISTS usage_daily")
    conn.execute(_TABLE)
    conn.execute("ALTER TABLE usage_daily ENABLE ROW LEVEL SECURITY")
    mine = f"owner = ({CURRENT_OWNER})"
    conn.execute(f"CREATE POLICY own_rows ON usage_daily USING ({mine}) WITH CHECK ({mine})")
    # Filled before the triggers exist: the fill's updates of rollup rows need not move sums.
    rebuild_daily(conn)
    for function in (_MOVE, _ATTRS, _PROVENANCE_CHANGED, _CWD_CHANGED):
        conn.execute(function.format(schema=schema))
    for name, sql_text in (
            ("usage_rollup_attrs", "BEFORE INSERT ON usage_rollup FOR EACH ROW"
                                   " EXECUTE FUNCTION usage_rollup_attrs()"),
            ("usage_rollup_daily", "AFTER INSERT OR UPDATE OR DELETE ON usage_rollup FOR EACH ROW"
                                   " EXECUTE FUNCTION usage_daily_move()"),
            ("provenance_daily", "AFTER INSERT OR UPDATE OF agent OR DELETE ON provenance FOR EACH ROW"
                                 " EXECUTE FUNCTION usage_daily_provenance()")):
        table = sql_text.split(" ON ", 1)[1].split()[0]
        conn.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        conn.execute(f"CREATE TRIGGER {name} {sql_text}")
    conn.execute("DROP TRIGGER IF EXISTS sessions_cwd_daily ON sessions")
    conn.execute("CREATE TRIGGER sessions_cwd_daily AFTER UPDATE OF cwd ON sessions FOR EACH ROW"
                 " WHEN (OLD.cwd IS DISTINCT FROM NEW.cwd) EXECUTE FUNCTION usage_daily_cwd()")
    for name in _FUNCTIONS:
        conn.execute(f"REVOKE ALL ON FUNCTION {name} FROM PUBLIC")
    conn.execute(_settle_with_owner_lock(schema))
    conn.execute(usage_by_user_view())
    grant_team(conn)
