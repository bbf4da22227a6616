"""The team part of a PostgreSQL store (docs/team.md): members, the aggregates, the audited
door, and the retention of a team store (holds, prune, the deletion log), over the store's
:class:`~sessiontree.stores.postgres.connection.PostgresDatabase`.

The roles, policies and views these read are created by the schema step of :mod:`.team`
(``m008_team``); this module is apart from it because the schema steps are imported by
the database handle, which this part uses.
"""

from __future__ import annotations

import time
from typing import Any

from sessiontree.errors import StorageError
from sessiontree.format.codec import ParsedSession
from sessiontree.stores.base import AuditRecord, PruneRecord, TeamMember
from sessiontree.stores.postgres.connection import PostgresDatabase
from sessiontree.stores.postgres.reads import PostgresStoreReads
from sessiontree.stores.postgres.team import GROUPS, ROLES, create_role, grant_team

try:  # an optional extra: sessiontree[postgres]
    from psycopg import sql
    from psycopg.rows import dict_row
    from psycopg.types.numeric import IntLoader
except ImportError:  # pragma: no cover - exercised only without the extra
    sql = None  # type: ignore[assignment]
    dict_row = IntLoader = None  # type: ignore[assignment,misc]

__all__ = ["PostgresTeam"]


class PostgresTeam:
    """The team capability of :class:`~sessiontree.stores.postgres.store.PostgresStore`
    (docs/team.md): members, aggregates, the audited door, and the retention of a team
    store (holds, prune, the deletion log), each in a transaction of ``db``; the door
    parses what it opens with the ``reads`` part."""

    def __init__(self, db: PostgresDatabase, reads: PostgresStoreReads) -> None:
        self.db = db
        self.reads = reads

    # -- people and roles ----------------------------------------------------------------

    def team_add(self, name: str, role: str, password: str | None = None) -> None:
        """Create login role ``name`` (or take the existing one) and put it in the group
        of ``role`` only (``member``, ``lead`` or ``admin``). Run by the database owner
        with ``CREATEROLE``.

        Raises:
            ValueError: an unknown role or an empty name.
            StorageError: the database refused (e.g. no right to create roles).
        """
        if role not in GROUPS:
            raise ValueError(f"unknown team role {role!r} (one of {', '.join(ROLES)})")
        if not name or "\x00" in name:
            raise ValueError("a team member needs a name")
        with self.db.transaction("team add", write=True) as conn:
            if not grant_team(conn):
                raise StorageError(f"team add on {self.db.url}: the current role may not create roles "
                                   "(it needs CREATEROLE)")
            who = sql.Identifier(name)
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
                create_role(conn, name, login=True)
            for other, group in GROUPS.items():
                action = "GRANT {} TO {}" if other == role else "REVOKE {} FROM {}"
                conn.execute(sql.SQL(action).format(sql.Identifier(group), who))
            if password is not None:
                conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(who, sql.Literal(password)))

    def team_list(self) -> list[TeamMember]:
        """The login roles in the team's groups, by name, with their sessions here."""
        with self.db.transaction("team list", write=False) as conn:
            rows = conn.execute(
                "SELECT r.rolname, array_agg(g.rolname), bool_or(r.rolcanlogin),"
                " (SELECT count(*) FROM sessions AS s WHERE s.owner = r.rolname)"
                " FROM pg_auth_members AS m JOIN pg_roles AS g ON g.oid = m.roleid"
                " JOIN pg_roles AS r ON r.oid = m.member"
                " WHERE g.rolname = ANY(%s) AND NOT r.rolname = ANY(%s)"
                " GROUP BY r.rolname ORDER BY r.rolname COLLATE \"C\"",
                (list(GROUPS.values()), list(GROUPS.values()))).fetchall()
        out = []
        for name, groups, can_login, sessions in rows:
            role = next(r for r in reversed(ROLES) if GROUPS[r] in groups or r == "member")
            out.append(TeamMember(name, role, bool(can_login), int(sessions)))
        return out

    def team_remove(self, name: str) -> None:
        """Take login role ``name`` out of the team's groups and drop it. Its sessions stay,
        owned by the name, readable by no one but the database owner and the audited door
        (prune them as an admin to delete them).

        Raises:
            StorageError: no such member, or the database refused (the role owns objects).
        """
        with self.db.transaction("team remove", write=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_auth_members AS m JOIN pg_roles AS g ON g.oid = m.roleid"
                " JOIN pg_roles AS r ON r.oid = m.member WHERE g.rolname = ANY(%s) AND r.rolname = %s",
                (list(GROUPS.values()), name)).fetchone()
            if found is None:
                raise StorageError(f"team remove: {name!r} is not a member of the team on {self.db.url}")
            for group in GROUPS.values():
                conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))

    # -- aggregates ------------------------------------------------------------------------

    def team_usage(self, *, by_user: bool = False) -> list[dict[str, Any]]:
        """The team's usage aggregates (no text, title or path): one row per day, provider,
        model, agent and project (and user with ``by_user``, which only leads and admins
        may read), as ``{column: value}`` with integer token counts and ``cost_nanos``.

        Raises:
            StorageError: the database refused (``by_user`` for a member).
        """
        view = "team_usage_by_user" if by_user else "team_usage"
        return self._rows(view, "team usage")

    def team_sessions(self, *, by_user: bool = False) -> list[dict[str, Any]]:
        """Session, entry and message counts per day, agent and project (and user with
        ``by_user``); see :meth:`team_usage`."""
        view = "team_sessions_by_user" if by_user else "team_sessions"
        return self._rows(view, "team sessions")

    def _rows(self, view: str, what: str) -> list[dict[str, Any]]:
        """Every row of ``view`` as ``{column: value}``, in the order of its first five
        columns. The views' sums are ``numeric`` (a ``bigint`` column's ``sum``), whole
        numbers always: read as ``int`` by psycopg's own integer loader, instead of a
        ``Decimal`` per value turned into an ``int`` afterwards (21,900 rows of the lead's
        report: 0.108 -> 0.041 s of CPU; benchmarks/README.md, round six). A fraction would
        raise ``ValueError`` here rather than be cut."""
        with self.db.transaction(what, write=False) as conn:
            cur = conn.cursor(row_factory=dict_row)
            cur.adapters.register_loader("numeric", IntLoader)  # this cursor only
            cur.execute(f"SELECT * FROM {view} ORDER BY 1, 2, 3, 4, 5")
            rows: list[dict[str, Any]] = cur.fetchall()
        return rows

    # -- the audited door -----------------------------------------------------------------

    def team_open(self, session_id: str, reason: str) -> tuple[int, ParsedSession]:
        """Read anyone's session through the audited door (admins only): first the audit
        record of who, when, which and why is written and committed, then the content is
        read with it (``team_read``), so nothing is shown without a record.

        Returns:
            ``(audit record id, session)``.

        Raises:
            ValueError: an empty reason.
            StorageError: not an admin, no such session, or the database failed.
        """
        if not reason.strip():
            raise ValueError("team open needs a reason (--reason TEXT)")
        with self.db.transaction("team open", write=True) as conn:
            audit_id = int(conn.execute("SELECT team_open(%s, %s)", (session_id, reason)).fetchone()[0])
        # A new transaction: team_read accepts only a record committed before it began.
        with self.db.transaction("team open", write=False) as conn, conn.cursor(binary=True) as cur:
            rows = cur.execute("SELECT seq, json FROM team_read(%s)", (audit_id,)).fetchall()
        if not rows or rows[0][0] != -1:
            raise StorageError(f"team open: session {session_id} vanished from {self.db.url}")
        return audit_id, self.reads.parsed(session_id, bytes(rows[0][1]), [bytes(row[1]) for row in rows[1:]], True)

    def team_audit(self) -> list[AuditRecord]:
        """Every access through the door to the caller's sessions (and the caller's own
        accesses), oldest first."""
        with self.db.transaction("team audit", write=False) as conn:
            rows = conn.execute("SELECT id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
                                " reader, session_id, session_owner, reason FROM team_audit ORDER BY id").fetchall()
        return [AuditRecord(int(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in rows]

    # -- retention (RetentionLedger) -----------------------------------------------------

    def prune(self, older_than_ms: float, *, agent: str | None = None, dry_run: bool = False,
              everyone: bool = False) -> list[PruneRecord]:
        """Delete whole sessions whose last activity is before ``older_than_ms`` (Unix ms),
        of ``agent`` if given, sparing held ones, and log each in ``deletion_log`` (ids,
        counts, sizes; never content), in one transaction. Under row-level security a
        member prunes their own sessions; ``everyone`` (admins: ``team_prune``) prunes
        every owner's by policy.

        Raises:
            StorageError: the database refused (``everyone`` for a non-admin).
        """
        function = "team_prune" if everyone else "prune_own"
        with self.db.transaction("prune", write=True) as conn:
            rows = conn.execute(f"SELECT session_id, session_owner, entries, bytes FROM {function}(%s, %s, %s)",
                                (int(older_than_ms), agent or "", dry_run)).fetchall()
        return [PruneRecord(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    def set_hold(self, session_id: str, held: bool) -> bool:
        """Hold ``session_id`` (``held``) so prune spares it, or let it go; whether the
        session exists (visible to the caller).

        Raises:
            StorageError: the database failed.
        """
        with self.db.transaction("hold", write=True) as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone() is None:
                return False
            if held:
                conn.execute("INSERT INTO holds (session_id, held_at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                             (session_id, int(time.time() * 1000)))
            else:
                conn.execute("DELETE FROM holds WHERE session_id = %s", (session_id,))
        return True

    def holds(self) -> list[str]:
        """The held sessions' ids (the caller's, under row-level security), sorted."""
        with self.db.transaction("holds", write=False) as conn:
            return sorted(row[0] for row in conn.execute("SELECT session_id FROM holds"))

    def deletion_log(self) -> list[dict[str, Any]]:
        """The deletion log (the caller's sessions' entries), oldest first, as
        ``{deleted_at, deleted_by, owner, session_id, entries, bytes, reason}``."""
        with self.db.transaction("deletion log", write=False) as conn:
            rows = conn.execute("SELECT deleted_at, deleted_by, session_owner, session_id, entries, bytes, reason"
                                " FROM deletion_log ORDER BY seq").fetchall()
        keys = ("deleted_at", "deleted_by", "owner", "session_id", "entries", "bytes", "reason")
        return [dict(zip(keys, row, strict=True)) for row in rows]

