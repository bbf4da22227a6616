"""``prune`` prints one tab-separated line per session: the fields are escaped, the tabs
between them are not (docs/terminal-output.md, "Two modes"). They used to come out as
``019985ca-…\\x09202 entries\\x09347053 bytes``: the whole line went through ``safe_line``."""

from __future__ import annotations

import pytest

from cli_support import run_cli
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store

SID = "019cadb4-6e80-7a3c-9b1d-0000000000e1"


@pytest.mark.parametrize("dry_run", [True, False])
def test_prune_lines_keep_their_tabs(tmp_path, dry_run):
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    m = SessionManager.create("/p\t\x1b", store=store, id=SID)
    m.append_message({"role": "user", "content": "hi", "timestamp": 1})
    m.append_message({"role": "user", "content": "again", "timestamp": 2})
    m.append_message({"role": "user", "content": "more", "timestamp": 3})
    store.close()
    args = ["prune", "--older-than", "0s", *(["--dry-run"] if dry_run else [])]
    out = run_cli(url, *args).stdout
    fields = out.rstrip("\n").split("\t")
    assert fields[:2] == [SID, "3 entries"], out  # the three messages appended above
    assert fields[2].endswith(" bytes") and fields[2].split()[0].isdigit(), out
    assert "\\x09" not in out
