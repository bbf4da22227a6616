"""A team store private by construction (docs/team.md): roles, row-level security,
aggregate views and the audited door, all in PostgreSQL's own mechanisms.

The schema step :func:`m008_team` (listed in :mod:`.schema`) gives every session an
``owner`` (the role that wrote it, ``DEFAULT current_user``; sessions stored before
the step belong to the role that ran it), turns row-level security on for every
table holding content, creates the aggregate views and the append-only audit table,
and grants all of it to three group roles:

=======================  =============================================================
``sessiontree_member``   reads and writes its own sessions (and their derived rows,
                         sync state, provenance); reads the team aggregates
                         (``team_usage``, ``team_sessions``: no user, text, title or path)
``sessiontree_lead``     a member who also reads the aggregates by user
                         (``team_usage_by_user``, ``team_sessions_by_user``)
``sessiontree_admin``    a member who may open one session of anyone's through the
                         audited door (:meth:`~sessiontree.stores.postgres.teamaccess.PostgresTeam.team_open`)
=======================  =============================================================

The policies are the database's, so they hold for a direct SQL connection as much as
for our commands. The role that owns the tables (the one that ran the migration, or a
superuser) is not subject to them: it is the operator's account, not a person's.
"""

from __future__ import annotations

from typing import Any

try:  # an optional extra: sessiontree[postgres]
    import psycopg
    from psycopg import sql
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

__all__ = [
    "AUDIT_WINDOW_S",
    "CONTENT_TABLES",
    "GROUPS",
    "OWN_ROWS_CAP",
    "OWN_ROWS_SHARE",
    "ROLES",
    "create_role",
    "grant_team",
    "m008_team",
    "own_rows_apply",
    "own_rows_keys",
]

#: The three team roles (``--role``) and the group role each login role is put in.
GROUPS: dict[str, str] = {"member": "sessiontree_member", "lead": "sessiontree_lead",
                          "admin": "sessiontree_admin"}
#: The roles, in order of what they may read.
ROLES: tuple[str, ...] = tuple(GROUPS)

#: Seconds an audit record of ``team open`` lets its reader read the session it names.
AUDIT_WINDOW_S = 600

#: The large tables whose rows hang off a session (``session_id``): each row carries
#: its session's ``owner`` (copied by :data:`_COPY_OWNER` when the tables' owner
#: writes, ``DEFAULT current_user`` otherwise; moved with the session by
#: :data:`_MOVE_OWNER`), so the policy is a plain comparison, not a subquery.
_OWNER_COPY_TABLES = ("entries", "message_texts", "search_entries", "usage_ledger")
#: The small ones: a row is visible when its session is (the ``sessions`` policy
#: applies inside the policy's subquery).
_SESSION_CHILD_TABLES = ("provenance",)
#: Tables of what one person's sync did (not tied to a stored session): their own ``owner``.
_OWNED_TABLES = ("sync_state", "archived_files")
#: Every table a member reads and writes (all under row-level security).
CONTENT_TABLES = ("sessions", *_OWNER_COPY_TABLES, *_SESSION_CHILD_TABLES, *_OWNED_TABLES)

# A row written by a role that row-level security does not limit (the tables' owner:
# reindex, migrations, a single-user store) gets its session's owner; a member's row
# keeps DEFAULT current_user, which the policy's WITH CHECK compares.
_COPY_OWNER = """
CREATE OR REPLACE FUNCTION session_row_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT row_security_active(TG_RELID) THEN
        SELECT s.owner INTO NEW.owner FROM sessions AS s WHERE s.id = NEW.session_id;
    END IF;
    RETURN NEW;
END $$"""

#: The tables whose rows carry their session's owner, as of step ``m008_team``.
OWNED_TABLES = ("entries", "message_texts", "search_entries", "usage_ledger")


def move_owner_sql(tables: tuple[str, ...]) -> str:
    """The trigger function ``session_owner_moved()``: a session handed to someone else (``UPDATE
    sessions SET owner``, by the tables' owner) takes its rows in ``tables`` along (docs/team.md).

    A later step that adds an owned table restates the function with it (``CREATE OR REPLACE``);
    the text for a given list is the same whichever step builds it.
    """
    moves = "".join(f"\n    UPDATE {table} SET owner = NEW.owner WHERE session_id = NEW.id;" for table in tables)
    return ("\nCREATE OR REPLACE FUNCTION session_owner_moved() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN"
            f"{moves}\n    RETURN NULL;\nEND $$")


_MOVE_OWNER = move_owner_sql(OWNED_TABLES)

# The aggregate views: per billed call de-duplicated within a user as ``stats`` does
# (largest number of rows of one content key in one session), the session attributes
# (agent, project) taken from the user's earliest session holding the call. The
# project is the last component of the session's cwd, never the path.
_USAGE_BY_USER = """
CREATE OR REPLACE VIEW team_usage_by_user WITH (security_barrier) AS
SELECT owner AS user_name,
       to_char(to_timestamp(ts_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
       coalesce(provider, '') AS provider, coalesce(model, '') AS model, agent, project,
       sum(m)::bigint AS calls, sum(m * input) AS input, sum(m * output) AS output,
       sum(m * cache_read) AS cache_read, sum(m * cache_write) AS cache_write,
       sum(m * coalesce(cost_nanos, 0)) AS cost_nanos
FROM (
    SELECT DISTINCT ON (per.owner, per.dedup_key)
           per.owner, max(per.n) OVER (PARTITION BY per.owner, per.dedup_key) AS m,
           per.provider, per.model, per.ts_ms, per.input, per.output, per.cache_read, per.cache_write,
           per.cost_nanos, coalesce(p.agent, '') AS agent,
           regexp_replace(rtrim(coalesce(s.cwd, ''), '/'), '^.*/', '') AS project
    FROM (SELECT s.owner, l.dedup_key, l.session_id, count(*) AS n, l.provider, l.model, l.ts_ms,
                 l.input, l.output, l.cache_read, l.cache_write, l.cost_nanos
          FROM usage_ledger AS l JOIN sessions AS s ON s.id = l.session_id
          GROUP BY s.owner, l.dedup_key, l.session_id, l.provider, l.model, l.ts_ms, l.input, l.output,
                   l.cache_read, l.cache_write, l.cost_nanos) AS per
    JOIN sessions AS s ON s.id = per.session_id
    LEFT JOIN provenance AS p ON p.session_id = per.session_id
    ORDER BY per.owner, per.dedup_key, coalesce(s.created_at, '') COLLATE "C", per.session_id COLLATE "C"
) AS calls
GROUP BY owner, day, provider, model, agent, project"""

# From step m009_usage_rollup: the same view, read from the rollup (keys one session
# holds, summed per session, 15-minute bucket and model) plus the shared ledger rows,
# de-duplicated within a user as above. A bucket never crosses a UTC day.
_PROJECT = "regexp_replace(rtrim(coalesce(s.cwd, ''), '/'), '^.*/', '')"
_USAGE_BY_USER_ROLLUP = f"""
CREATE OR REPLACE VIEW team_usage_by_user WITH (security_barrier) AS
SELECT user_name, day, provider, model, agent, project, sum(calls)::bigint AS calls, sum(input) AS input,
       sum(output) AS output, sum(cache_read) AS cache_read, sum(cache_write) AS cache_write,
       sum(cost_nanos) AS cost_nanos
FROM (
    SELECT s.owner AS user_name,
           to_char(to_timestamp(r.bucket / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
           r.provider, r.model, coalesce(p.agent, '') AS agent, {_PROJECT} AS project,
           r.calls, r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos
    FROM usage_rollup AS r JOIN sessions AS s ON s.id = r.session_id
    LEFT JOIN provenance AS p ON p.session_id = r.session_id
    WHERE r.calls <> 0
    UNION ALL
    SELECT owner, to_char(to_timestamp(ts_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
           coalesce(provider, ''), coalesce(model, ''), agent, project,
           m, m * input, m * output, m * cache_read, m * cache_write, m * coalesce(cost_nanos, 0)
    FROM (
        SELECT DISTINCT ON (per.owner, per.dedup_key)
               per.owner, max(per.n) OVER (PARTITION BY per.owner, per.dedup_key) AS m,
               per.provider, per.model, per.ts_ms, per.input, per.output, per.cache_read, per.cache_write,
               per.cost_nanos, coalesce(p.agent, '') AS agent, {_PROJECT} AS project
        FROM (SELECT s.owner, l.dedup_key, l.session_id, count(*) AS n, l.provider, l.model, l.ts_ms,
                     l.input, l.output, l.cache_read, l.cache_write, l.cost_nanos
              FROM usage_ledger AS l JOIN sessions AS s ON s.id = l.session_id
              WHERE l.shared
              GROUP BY s.owner, l.dedup_key, l.session_id, l.provider, l.model, l.ts_ms, l.input, l.output,
                       l.cache_read, l.cache_write, l.cost_nanos) AS per
        JOIN sessions AS s ON s.id = per.session_id
        LEFT JOIN provenance AS p ON p.session_id = per.session_id
        ORDER BY per.owner, per.dedup_key, coalesce(s.created_at, '') COLLATE "C", per.session_id COLLATE "C"
    ) AS calls
) AS parts
GROUP BY user_name, day, provider, model, agent, project"""


def rollup_views(conn: Any) -> None:
    """Schema step ``m009_usage_rollup``'s part here: ``team_usage_by_user`` (and so
    ``team_usage``) read from ``usage_rollup``, with the same rows as before."""
    conn.execute(_USAGE_BY_USER_ROLLUP)


_SESSIONS_BY_USER = """
CREATE OR REPLACE VIEW team_sessions_by_user WITH (security_barrier) AS
SELECT s.owner AS user_name, left(coalesce(s.created_at, ''), 10) AS day, coalesce(p.agent, '') AS agent,
       regexp_replace(rtrim(coalesce(s.cwd, ''), '/'), '^.*/', '') AS project,
       count(*)::bigint AS sessions, sum(s.entry_count)::bigint AS entries,
       sum(s.message_count)::bigint AS messages
FROM sessions AS s LEFT JOIN provenance AS p ON p.session_id = s.id
GROUP BY 1, 2, 3, 4"""

_USAGE = """
CREATE OR REPLACE VIEW team_usage WITH (security_barrier) AS
SELECT day, provider, model, agent, project, sum(calls)::bigint AS calls, sum(input) AS input,
       sum(output) AS output, sum(cache_read) AS cache_read, sum(cache_write) AS cache_write,
       sum(cost_nanos) AS cost_nanos
FROM team_usage_by_user GROUP BY 1, 2, 3, 4, 5"""

_SESSIONS = """
CREATE OR REPLACE VIEW team_sessions WITH (security_barrier) AS
SELECT day, agent, project, sum(sessions)::bigint AS sessions, sum(entries)::bigint AS entries,
       sum(messages)::bigint AS messages
FROM team_sessions_by_user GROUP BY 1, 2, 3"""

# The audited door, in two calls so the audit record is committed before any content
# leaves the database: team_open() records who, when, which and why and returns the
# record's id; team_read(id) returns the session's records only for a record of the
# caller's, written by an earlier transaction (at < now(): an earlier, committed one,
# since an uncommitted one is invisible) within the window.
_AUDIT = """
CREATE TABLE IF NOT EXISTS team_audit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The login role that opened the session (session_user).
    reader text NOT NULL,
    session_id text NOT NULL,
    -- sessions.owner when it was opened: who sees this record (team audit).
    session_owner text NOT NULL,
    reason text NOT NULL CHECK (btrim(reason) <> '')
)"""

_REFUSE = """
CREATE OR REPLACE FUNCTION team_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'team_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$"""

_OPEN = """
CREATE OR REPLACE FUNCTION team_open(p_session text, p_reason text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    v_owner text;
    v_id bigint;
BEGIN
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'team open needs a reason' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT owner INTO v_owner FROM sessions WHERE id = p_session;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no session %', p_session USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO team_audit (reader, session_id, session_owner, reason)
        VALUES (session_user, p_session, v_owner, p_reason) RETURNING id INTO v_id;
    RETURN v_id;
END $$"""

_READ = """
CREATE OR REPLACE FUNCTION team_read(p_audit bigint) RETURNS TABLE (seq integer, json bytea)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    v_session text;
BEGIN
    SELECT a.session_id INTO v_session FROM team_audit AS a
        WHERE a.id = p_audit AND a.reader = session_user AND a.at < now()
          AND a.at > now() - make_interval(secs => {window});
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no committed audit record % of % within {window} s', p_audit, session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY SELECT -1, s.header_json FROM sessions AS s WHERE s.id = v_session
        UNION ALL SELECT e.seq, e.json FROM entries AS e WHERE e.session_id = v_session
        ORDER BY 1;
END $$"""


# A member's search through the trigram index. Under row-level security the
# planner may not test a non-leakproof LIKE before the policy, so it reads every
# search row of the table; this function (the owner's rights) applies the same
# restriction itself, to the caller's own sessions (session_user), lets the index
# narrow the rows, and returns at most p_cap of their keys (never their text). The
# patterns are inlined as literals (format %L) so the planner sees them; with the
# cap, a frequent word stops early instead of collecting every match.
_OWN_SEARCH_ROWS = """
CREATE OR REPLACE FUNCTION own_search_rows(p_patterns text[], p_cap integer)
RETURNS TABLE (session_id text, seq integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    q text := 'SELECT s.session_id, s.seq FROM search_entries AS s WHERE s.owner = $1';
    p text;
BEGIN
    FOREACH p IN ARRAY coalesce(p_patterns, '{{}}'::text[]) LOOP
        q := q || format(' AND s.folded LIKE %L', p);
    END LOOP;
    RETURN QUERY EXECUTE q || ' LIMIT $2' USING session_user::text, p_cap;
END $$"""

#: Most candidate rows a member's search takes from ``own_search_rows``; with more,
#: the words are frequent and the search reads the member's rows instead (as the
#: owner's search does when the index would not pay). ``None``: one in
#: :data:`OWN_ROWS_SHARE` of the table's rows, between 100 and 20,000. Measured at
#: 50,000 rows: a candidate costs about 100 us through the ranking query, a row read
#: by the scan about 2 us, so candidates pay below about a fiftieth of the table.
OWN_ROWS_CAP: int | None = None
OWN_ROWS_SHARE = 50


def own_rows_apply(conn: Any) -> bool:
    """Whether row-level security limits the current role's reads of ``search_entries``
    (a member; not the tables' owner or a superuser), so a search should take its
    candidates from :func:`own_rows_keys`."""
    return bool(conn.execute("SELECT row_security_active('search_entries')").fetchone()[0])


def own_rows_keys(conn: Any, patterns: list[str], cap: int | None = None) -> list[tuple[str, int]] | None:
    """The ``(session_id, seq)`` of the caller's own search rows whose ``folded`` is
    ``LIKE`` every one of ``patterns``, found through the trigram index
    (``own_search_rows``); ``None`` when there are more than ``cap`` (default
    :data:`OWN_ROWS_CAP`)."""
    if cap is None:
        cap = OWN_ROWS_CAP
    if cap is None:
        # reltuples: the planner's row count, public in pg_class (no content).
        (total,), = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'search_entries'::regclass").fetchall()
        cap = min(20_000, max(100, int(max(total, 0)) // OWN_ROWS_SHARE))
    rows = conn.execute("SELECT session_id, seq FROM own_search_rows(%s::text[], %s)",
                        (patterns, cap + 1)).fetchall()
    return None if len(rows) > cap else [(row[0], row[1]) for row in rows]


def create_role(conn: Any, name: str, *, login: bool) -> None:
    """``CREATE ROLE``, tolerating one created meanwhile by another database's
    migration or ``team add`` (roles are cluster-wide; advisory locks are not)."""
    try:
        with conn.transaction():  # a savepoint: the race's error leaves the transaction usable
            conn.execute(sql.SQL("CREATE ROLE {} " + ("LOGIN" if login else "NOLOGIN")).format(sql.Identifier(name)))
    except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
        pass


def _ensure_groups(conn: Any) -> bool:
    """Create the group roles that are missing (lead and admin are members too); whether
    they all exist afterwards (``False``: the role running this may not create roles,
    so ``team add`` by one who may finishes the job)."""
    existing = {row[0] for row in conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)",
                                               (list(GROUPS.values()),))}
    missing = [group for group in GROUPS.values() if group not in existing]
    if missing:
        can = conn.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user").fetchone()
        if not (can and can[0]):
            return False
        for group in missing:
            create_role(conn, group, login=False)
    member = sql.Identifier(GROUPS["member"])
    for role in ("lead", "admin"):
        if conn.execute("SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
                        " JOIN pg_roles r ON r.oid = m.member WHERE g.rolname = %s AND r.rolname = %s",
                        (GROUPS["member"], GROUPS[role])).fetchone() is None:
            conn.execute(sql.SQL("GRANT {} TO {}").format(member, sql.Identifier(GROUPS[role])))
    return True


def grant_team(conn: Any) -> bool:
    """Create the group roles if need be and grant them what docs/team.md says each may
    do (idempotent: the schema step and ``team add`` both run it). Whether the grants
    were made (``False``: the group roles could not be created by this role)."""
    if not _ensure_groups(conn):
        return False
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    ident = sql.Identifier
    member, lead, admin = (ident(GROUPS[r]) for r in ROLES)
    statements = [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(schema), member),
        sql.SQL("GRANT SELECT ON schema_migrations TO {}").format(member),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
            sql.SQL(", ").join(map(ident, CONTENT_TABLES)), member),
        sql.SQL("GRANT SELECT, INSERT, DELETE ON holds TO {}").format(member),
        sql.SQL("GRANT SELECT, INSERT ON deletion_log TO {}").format(member),
        sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(ident(schema), member),
        sql.SQL("GRANT SELECT ON team_usage, team_sessions, team_audit TO {}").format(member),
        sql.SQL("GRANT SELECT ON team_usage_by_user, team_sessions_by_user TO {}").format(lead),
        sql.SQL("GRANT SELECT ON team_usage_by_user, team_sessions_by_user TO {}").format(admin),
        sql.SQL("GRANT EXECUTE ON FUNCTION team_open(text, text), team_read(bigint),"
                " team_prune(bigint, text, boolean) TO {}").format(admin),
        sql.SQL("GRANT EXECUTE ON FUNCTION prune_own(bigint, text, boolean), own_search_rows(text[], integer)"
                " TO {}").format(member),
    ]
    if conn.execute("SELECT to_regclass('usage_rollup') IS NOT NULL").fetchone()[0]:
        # Step m009_usage_rollup: a member removes their own rollup rows with their
        # session's; the rollup is written only by usage_settle (the owner's rights).
        statements += [
            sql.SQL("GRANT SELECT, DELETE ON usage_rollup TO {}").format(member),
            sql.SQL("GRANT EXECUTE ON FUNCTION usage_settle(text) TO {}").format(member),
        ]
    if conn.execute("SELECT to_regprocedure('own_recent_rows(text[], integer, integer)') IS NOT NULL").fetchone()[0]:
        # Step m011_owner_recent: a member's frequent-word search (stores/postgres/recent.py).
        statements.append(sql.SQL("GRANT EXECUTE ON FUNCTION own_recent_rows(text[], integer, integer) TO {}")
                          .format(member))
    if conn.execute("SELECT to_regprocedure('own_recent_scored(text[], tsquery, integer, double precision,"
                    " double precision, text[], text[])') IS NOT NULL").fetchone()[0]:
        # Step m013_filtered_walk: the walk with the search filters (it replaces m011's),
        # and the same walk ranking its matches (stores/postgres/recent.py).
        statements.append(sql.SQL(
            "GRANT EXECUTE ON FUNCTION own_recent_rows(text[], integer, integer, double precision, double precision,"
            " text[], text[]), own_recent_scored(text[], tsquery, integer, double precision, double precision,"
            " text[], text[]) TO {}").format(member))
    if conn.execute("SELECT to_regclass('usage_daily') IS NOT NULL").fetchone()[0]:  # m012 (stores/postgres/daily.py)
        statements.append(sql.SQL("GRANT SELECT ON usage_daily TO {}").format(member))  # own rows; written by triggers
    for statement in statements:
        conn.execute(statement)
    return True


def _replace_policies(conn: Any) -> None:
    """Drop this step's policies where a table already has them (the step may run again
    on a schema someone edited by hand, as the derived tables' steps may)."""
    for table, policy in conn.execute(
            "SELECT tablename, policyname FROM pg_policies WHERE schemaname = current_schema()"
            " AND policyname IN ('own_rows', 'seen', 'logged')").fetchall():
        conn.execute(sql.SQL("DROP POLICY {} ON {}").format(sql.Identifier(policy), sql.Identifier(table)))


def m008_team(conn: Any) -> None:
    """Owners, row-level security, aggregate views, the audit table and its door, holds
    and the deletion log (docs/team.md); grants to the group roles when the role running
    the step may create them (else ``team add`` makes them). Every session already
    stored is owned by the role running this step."""
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    conn.execute("ALTER TABLE sessions ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT current_user")
    conn.execute("CREATE INDEX IF NOT EXISTS sessions_owner ON sessions (owner, id)")
    for table in _OWNED_TABLES:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT current_user")
    conn.execute("ALTER TABLE sessions ENABLE ROW LEVEL SECURITY")
    _replace_policies(conn)
    conn.execute("CREATE POLICY own_rows ON sessions USING (owner = current_user) WITH CHECK (owner = current_user)")
    conn.execute(_COPY_OWNER)
    conn.execute(_MOVE_OWNER)
    for table in _OWNER_COPY_TABLES:
        # Rows stored before this step belong to the role running it, as their sessions do.
        conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT current_user")
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_owner ON {table}")
        conn.execute(f"CREATE TRIGGER {table}_owner BEFORE INSERT ON {table}"
                     " FOR EACH ROW EXECUTE FUNCTION session_row_owner()")
        conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        # Reads compare a column (no subquery per query: a member's reads cost what the
        # owner's do); a write also proves the session is the writer's (its primary key).
        conn.execute(f"CREATE POLICY own_rows ON {table} USING (owner = current_user)"
                     f" WITH CHECK (owner = current_user"
                     f" AND EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = {table}.session_id))")
    conn.execute("DROP TRIGGER IF EXISTS sessions_owner_moved ON sessions")
    conn.execute("CREATE TRIGGER sessions_owner_moved AFTER UPDATE OF owner ON sessions FOR EACH ROW"
                 " WHEN (OLD.owner IS DISTINCT FROM NEW.owner) EXECUTE FUNCTION session_owner_moved()")
    for table in _SESSION_CHILD_TABLES:
        # IN for reads: the planner hashes the caller's session ids once per query
        # instead of probing sessions once per row; EXISTS for a written row.
        conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"CREATE POLICY own_rows ON {table} USING (session_id IN (SELECT id FROM sessions))"
                     f" WITH CHECK (EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = {table}.session_id))")
    for table in _OWNED_TABLES:
        conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"CREATE POLICY own_rows ON {table} USING (owner = current_user)"
                     " WITH CHECK (owner = current_user)")
    for statement in (_SESSIONS_BY_USER, _USAGE_BY_USER, _USAGE, _SESSIONS, _AUDIT, _REFUSE):
        conn.execute(statement)
    conn.execute("DROP TRIGGER IF EXISTS team_audit_append_only ON team_audit")
    conn.execute("DROP TRIGGER IF EXISTS team_audit_no_truncate ON team_audit")
    conn.execute("CREATE TRIGGER team_audit_append_only BEFORE UPDATE OR DELETE ON team_audit"
                 " FOR EACH ROW EXECUTE FUNCTION team_audit_refuse()")
    conn.execute("CREATE TRIGGER team_audit_no_truncate BEFORE TRUNCATE ON team_audit"
                 " FOR EACH STATEMENT EXECUTE FUNCTION team_audit_refuse()")
    conn.execute("ALTER TABLE team_audit ENABLE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY seen ON team_audit FOR SELECT"
                 " USING (session_owner = current_user OR reader = current_user)")
    conn.execute(_OPEN.format(schema=schema))
    conn.execute(_READ.format(schema=schema, window=AUDIT_WINDOW_S))
    conn.execute(_OWN_SEARCH_ROWS.format(schema=schema))
    _retention(conn, schema)
    for name in ("team_open(text, text)", "team_read(bigint)", "team_prune(bigint, text, boolean)",
                 "prune_own(bigint, text, boolean)", "team_audit_refuse()", "own_search_rows(text[], integer)",
                 "session_row_owner()", "session_owner_moved()"):
        conn.execute(f"REVOKE ALL ON FUNCTION {name} FROM PUBLIC")
    grant_team(conn)


# -- retention: holds, the deletion log, prune --------------------------------------------

_HOLDS = """
CREATE TABLE IF NOT EXISTS holds (
    session_id text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    -- Milliseconds since the epoch (UTC).
    held_at bigint NOT NULL
)"""

_DELETION_LOG = """
CREATE TABLE IF NOT EXISTS deletion_log (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Milliseconds since the epoch (UTC).
    deleted_at bigint NOT NULL,
    -- The login role that pruned (session_user), and the session's owner.
    deleted_by text NOT NULL,
    session_owner text NOT NULL,
    session_id text NOT NULL,
    entries bigint NOT NULL,
    -- Bytes of the stored records (header and entries); never their content.
    bytes bigint NOT NULL,
    reason text NOT NULL
)"""

# One function does a prune's selection, deletion and log in one statement, so its
# three steps cannot be separated: prune_own (SECURITY INVOKER: row-level security
# limits it to the caller's sessions) and team_prune (SECURITY DEFINER, for admins:
# every owner's). Age is the session's last activity (modified_ms); held sessions are
# spared; agent '' matches every agent.
_PRUNE = """
CREATE OR REPLACE FUNCTION {name}(p_cutoff_ms bigint, p_agent text, p_dry_run boolean)
RETURNS TABLE (session_id text, session_owner text, entries bigint, bytes bigint)
LANGUAGE plpgsql {security} SET search_path = {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS pruned (session_id text, session_owner text, entries bigint, bytes bigint)
        ON COMMIT DROP;
    DELETE FROM pg_temp.pruned;
    INSERT INTO pg_temp.pruned
        SELECT s.id, s.owner, s.entry_count::bigint,
               (octet_length(s.header_json) + coalesce((SELECT sum(octet_length(e.json)) FROM entries AS e
                                                        WHERE e.session_id = s.id), 0))::bigint
        FROM sessions AS s LEFT JOIN provenance AS p ON p.session_id = s.id
        WHERE s.modified_ms < p_cutoff_ms
          AND NOT EXISTS (SELECT 1 FROM holds AS h WHERE h.session_id = s.id)
          AND (p_agent = '' OR coalesce(p.agent, '') = p_agent)
        FOR UPDATE OF s;
    IF NOT p_dry_run THEN
        INSERT INTO deletion_log (deleted_at, deleted_by, session_owner, session_id, entries, bytes, reason)
            SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, session_user, x.session_owner,
                   x.session_id, x.entries, x.bytes, {reason}
            FROM pg_temp.pruned AS x ORDER BY x.session_id;
        DELETE FROM sessions AS s USING pg_temp.pruned AS x WHERE s.id = x.session_id;
    END IF;
    RETURN QUERY SELECT x.session_id, x.session_owner, x.entries, x.bytes FROM pg_temp.pruned AS x ORDER BY x.session_id;
END $$"""


def _retention(conn: Any, schema: str) -> None:
    conn.execute(_HOLDS)
    conn.execute(_DELETION_LOG)
    conn.execute("ALTER TABLE holds ENABLE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY own_rows ON holds USING (session_id IN (SELECT id FROM sessions))"
                 " WITH CHECK (EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = holds.session_id))")
    # Append-only for everyone but the table owner, as the audit table: written by the
    # prune functions only; each person reads the log of their own sessions.
    conn.execute("ALTER TABLE deletion_log ENABLE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY seen ON deletion_log FOR SELECT"
                 " USING (session_owner = current_user OR deleted_by = current_user)")
    conn.execute("CREATE POLICY logged ON deletion_log FOR INSERT WITH CHECK (session_owner = current_user)")
    conn.execute("DROP TRIGGER IF EXISTS deletion_log_append_only ON deletion_log")
    conn.execute("CREATE TRIGGER deletion_log_append_only BEFORE UPDATE OR DELETE ON deletion_log"
                 " FOR EACH ROW EXECUTE FUNCTION team_audit_refuse()")
    conn.execute(_PRUNE.format(name="prune_own", security="SECURITY INVOKER", schema=schema,
                               reason="'owner'"))
    conn.execute(_PRUNE.format(name="team_prune", security="SECURITY DEFINER", schema=schema,
                               reason="'policy'"))
