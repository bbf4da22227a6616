"""``restore`` and ``resume`` of a Gemini CLI session (issue 44 items 2 and 3; docs/agents/gemini.md,
"restore"), on the real chat ``f0a689a6`` of ``../shared/corpus/gemini``: without ``--as`` its own
chat document comes back byte for byte where Gemini CLI keeps it (never a pi file in
``~/.pi/agent/sessions/----/``); ``resume`` of a chat whose file is gone writes it back and says so;
``import`` of a Gemini chats folder points to ``sync PATH``."""

from __future__ import annotations

import hashlib
import shutil

import corpus
from cli_support import run_cli, run_cli_json

pytestmark = corpus.NEEDS_SHARED

PROJECT = "9126eddec7f67e038794657b4d517dd9cb5226468f30b5ee7296c27d65e84fde"
NAME = "session-2025-12-09T19-51-f0a689a6.json"
CHAT = corpus.shared() / "gemini" / "tmp" / PROJECT / "chats" / NAME
SESSION = "f0a689a6-b0ac-407f-afcc-4fafa9e14e8a"
#: FOREIGN.md: the file's sha256 begins so.
SHA_PREFIX = "bb89c81f01bdb1f4"


def _synced(tmp_path, home):
    chat = home / ".gemini" / "tmp" / PROJECT / "chats" / NAME
    chat.parent.mkdir(parents=True)
    shutil.copy(CHAT, chat)
    db = f"sqlite:///{tmp_path / 'g.db'}"
    assert run_cli_json(db, "sync")["new"] == 1
    return db, chat


def test_restore_without_as_gives_the_chat_back_where_gemini_keeps_it(tmp_path, _fake_home):
    db, chat = _synced(tmp_path, _fake_home)
    assert hashlib.sha256(CHAT.read_bytes()).hexdigest().startswith(SHA_PREFIX)
    present = run_cli_json(db, "restore", SESSION)
    assert (present["status"], present["path"]) == ("present", str(chat))
    chat.unlink()
    written = run_cli_json(db, "restore", SESSION)
    assert (written["status"], written["path"]) == ("written", str(chat))
    assert chat.read_bytes() == CHAT.read_bytes()
    assert not (_fake_home / ".pi").exists()  # no pi file, no "----" folder
    assert run_cli_json(db, "sync")["unchanged"] == 1  # the agent's own file, as synced


def test_restore_of_a_chat_synced_from_elsewhere_uses_gemini_clis_layout(tmp_path, _fake_home):
    # Synced by path from outside ~/.gemini: the place comes from the document's own frame.
    outside = tmp_path / "copy" / NAME
    outside.parent.mkdir()
    shutil.copy(CHAT, outside)
    db = f"sqlite:///{tmp_path / 'g.db'}"
    run_cli(db, "sync", str(outside))
    result = run_cli_json(db, "restore", SESSION)
    expected = _fake_home / ".gemini" / "tmp" / PROJECT / "chats" / NAME
    assert (result["status"], result["path"]) == ("written", str(expected))
    assert expected.read_bytes() == CHAT.read_bytes()
    # --as pi still writes a pi file, on request.
    as_pi = run_cli_json(db, "restore", SESSION, "--as", "pi")
    assert as_pi["path"].startswith(str(_fake_home / ".pi" / "agent" / "sessions"))


def test_resume_of_a_gemini_session_whose_chat_is_gone_writes_it_back_and_says_so(tmp_path, _fake_home):
    db, chat = _synced(tmp_path, _fake_home)
    assert run_cli(db, "resume", SESSION).stdout.strip() == f"gemini --resume {SESSION}"
    chat.unlink()
    result = run_cli(db, "resume", SESSION)
    assert "was not in place" in result.stderr and str(chat) in result.stderr
    assert result.stdout.strip().endswith(f"gemini --resume {SESSION}")
    assert chat.read_bytes() == CHAT.read_bytes()
    assert not (_fake_home / ".pi").exists()
    # --as pi is honoured (it was ignored for a Gemini session).
    as_pi = run_cli_json(db, "resume", SESSION, "--as", "pi")
    assert as_pi["agent"] == "pi" and as_pi["command"][:2] == ["pi", "--session"]


def test_import_of_a_gemini_chats_folder_points_to_sync(tmp_path, _fake_home):
    folder = tmp_path / "chats"
    folder.mkdir()
    shutil.copy(CHAT, folder / NAME)
    result = run_cli(f"sqlite:///{tmp_path / 'i.db'}", "import", str(folder), "--json", code=1)
    text = result.stdout + result.stderr
    assert "no *.jsonl files" in text and "Gemini CLI chat" in text and "sessiontree sync PATH" in text
    # A folder with neither keeps the plain reason.
    (tmp_path / "empty").mkdir()
    plain = run_cli(f"sqlite:///{tmp_path / 'i.db'}", "import", str(tmp_path / "empty"), "--json", code=1)
    assert "sync PATH" not in plain.stdout + plain.stderr
