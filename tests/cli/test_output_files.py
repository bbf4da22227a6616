"""Files the user asks us to write (``export -o``, ``check --repair``) and files
we are asked to read from directories (``import``, ``check``): docs/output-files.md.

* a write that fails midway leaves the old file byte for byte, and no temporary file;
* a symbolic link at the output path is refused, and the file it points to is untouched;
* the repaired copy keeps the input's permission bits;
* a dangling or looping ``*.jsonl`` link in an imported directory is reported, with a reason.

Disk-full is simulated with ``RLIMIT_FSIZE`` in a child process (writes past the
limit fail with ``EFBIG``, as on a full disk); the limit binds root too.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessiontree.cli import cli
from sessiontree.format.outfile import OutputPathError, write_atomic

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BRANCHING = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
HEADER = {"type": "session", "version": 4, "id": "019cadb4-0000-7000-8000-00000000abcd",
          "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp/p", "createdAt": "2026-01-01T00:00:00.000Z"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def invoke(*argv: str):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, list(argv), catch_exceptions=False)


def _limit_file_size(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill, like ENOSPC
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def run_limited(limit: int, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the command line in a child whose writes stop at ``limit`` bytes per file."""
    code = "import sys; from sessiontree.cli import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          preexec_fn=_limit_file_size(limit), timeout=60, cwd=ROOT)


def big_session(path: Path, text_bytes: int) -> Path:
    """A valid session whose one user message holds ``text_bytes`` of text."""
    entry = {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
             "message": {"role": "user", "content": "x" * text_bytes, "timestamp": 1767225601000}}
    path.write_text(json.dumps(HEADER) + "\n" + json.dumps(entry) + "\n")
    return path


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# --------------------------------------------------------------------------- write_atomic


def test_write_atomic_new_file_gets_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "out", b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o640  # 0o666 & ~0o027
    assert (tmp_path / "out").read_bytes() == b"data"


def test_write_atomic_replacing_keeps_the_old_mode(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")
    target.chmod(0o604)
    write_atomic(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.read_bytes() == b"new"


@pytest.mark.parametrize("dangling", [False, True])
def test_write_atomic_refuses_a_symlink(tmp_path: Path, dangling: bool) -> None:
    victim = tmp_path / "victim"
    if not dangling:
        victim.write_bytes(b"precious")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(OutputPathError, match="symbolic link"):
        write_atomic(link, b"new")
    assert link.is_symlink()
    assert (victim.read_bytes() == b"precious") if not dangling else not victim.exists()
    assert leftovers(tmp_path) == []


def _special(kind: str, path: Path) -> None:
    """Make a FIFO, a socket or a character device node (/dev/null's numbers) at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs privileges")


_KIND_CHECK = {"fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK, "device": stat.S_ISCHR}
_KIND_WORDS = {"fifo": "FIFO", "socket": "socket", "device": "device node"}


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_write_atomic_refuses_a_special_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out"
    _special(kind, target)
    with pytest.raises(OutputPathError, match=f"it is an? {_KIND_WORDS[kind]}.*not a regular file"):
        write_atomic(target, b"new")
    assert _KIND_CHECK[kind](os.lstat(target).st_mode)  # still what it was
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("given", [None, 0o6755])
def test_write_atomic_drops_setuid_setgid_and_sticky(tmp_path: Path, given: int | None) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")
    target.chmod(0o7755)
    assert stat.S_IMODE(target.stat().st_mode) == 0o7755
    write_atomic(target, b"new", mode=given)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert target.read_bytes() == b"new"


# --------------------------------------------------------------------------- export -o


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    big = big_session(tmp_path / "big.jsonl", 300_000)
    assert invoke("--store", url, "import", str(big), str(EXAMPLES)).exit_code == 0
    return url


def test_export_that_fails_midway_leaves_the_old_file(store_url: str, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "copy.jsonl"
    target.write_bytes(b"the user's earlier export\n")
    before = sha(target)
    result = run_limited(100_000, "--store", store_url, "export", HEADER["id"], "-o", str(target))
    assert result.returncode == 1, result
    assert "sessiontree: error:" in result.stderr and "Traceback" not in result.stderr
    assert sha(target) == before
    assert leftovers(out_dir) == []


def test_export_errors_name_the_path_given_not_the_temporary_file(store_url: str, tmp_path: Path) -> None:
    """A missing directory, and a write that fails midway: the one-line error names the
    path the user gave (it used to quote ``.x.jsonl.0_t1fiez.tmp``, a file that no longer exists)."""
    target = tmp_path / "missing" / "x.jsonl"
    result = invoke("--store", store_url, "export", BRANCHING, "-o", str(target))
    assert result.exit_code == 1
    assert result.stderr.strip() == f"sessiontree: error: No such file or directory: {target}"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run_limited(100_000, "--store", store_url, "export", HEADER["id"], "-o", str(out_dir / "x.jsonl"))
    assert result.returncode == 1 and str(out_dir / "x.jsonl") in result.stderr, result.stderr
    assert ".tmp" not in result.stderr and leftovers(out_dir) == []


def test_export_to_a_symlink_is_refused(store_url: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    result = invoke("--store", store_url, "export", BRANCHING, "-o", str(link))
    assert result.exit_code == 1
    assert "symbolic link" in result.stderr
    assert victim.read_bytes() == b"precious" and link.is_symlink()


def test_export_writes_the_session(store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "copy.jsonl"
    assert invoke("--store", store_url, "export", BRANCHING, "-o", str(target)).exit_code == 0
    assert target.read_bytes() == (EXAMPLES / "branching.jsonl").read_bytes()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_export_to_a_special_file_is_refused_in_one_line(store_url: str, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.jsonl"
    _special(kind, target)
    result = invoke("--store", store_url, "export", BRANCHING, "-o", str(target))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sessiontree: error: ") and "not a regular file" in lines[0]
    assert _KIND_CHECK[kind](os.lstat(target).st_mode)
    assert leftovers(tmp_path) == []


def test_export_over_a_setuid_file_drops_the_bit(store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "copy.jsonl"
    target.write_bytes(b"old")
    target.chmod(0o4750)
    assert invoke("--store", store_url, "export", BRANCHING, "-o", str(target)).exit_code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


# --------------------------------------------------------------------------- check --repair


def damaged(path: Path, text_bytes: int = 10) -> Path:
    """A session whose second line is torn (a repairable problem)."""
    big_session(path, text_bytes)
    with open(path, "ab") as handle:
        handle.write(b'{"type":"message","id":"a00')
    return path


def test_repair_output_failure_says_the_copy_could_not_be_written(tmp_path: Path) -> None:
    source = damaged(tmp_path / "s.jsonl", 300_000)
    result = run_limited(100_000, "check", "--repair", str(source))
    assert result.returncode == 1
    assert "could not write the repaired copy to" in result.stdout
    assert "File too large" in result.stdout
    assert "cannot check" not in result.stdout
    assert not (tmp_path / "s.repaired.jsonl").exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(("input_mode", "copy_mode"), [
    pytest.param(0o640, 0o640, id="keeps-the-input-mode"),
    pytest.param(0o6750, 0o750, id="drops-setuid-and-setgid"),
])
def test_repaired_copy_mode(tmp_path: Path, input_mode: int, copy_mode: int) -> None:
    source = damaged(tmp_path / "s.jsonl")
    source.chmod(input_mode)
    result = invoke("check", "--repair", str(source))
    assert result.exit_code == 0, result.stdout
    assert stat.S_IMODE((tmp_path / "s.repaired.jsonl").stat().st_mode) == copy_mode


def test_repair_refuses_a_fifo_at_the_output_path(tmp_path: Path) -> None:
    source = damaged(tmp_path / "s.jsonl")
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    result = invoke("check", "--repair", "-o", str(fifo), str(source))
    assert result.exit_code == 1
    assert "could not write the repaired copy" in result.stdout and "not a regular file" in result.stdout
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_repair_refuses_a_symlink_at_the_output_path(tmp_path: Path) -> None:
    source = damaged(tmp_path / "s.jsonl")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (tmp_path / "s.repaired.jsonl").symlink_to(victim)
    result = invoke("check", "--repair", str(source))
    assert result.exit_code == 1
    assert "could not write the repaired copy" in result.stdout and "symbolic link" in result.stdout
    assert victim.read_bytes() == b"precious"
    assert (tmp_path / "s.repaired.jsonl").is_symlink()


# --------------------------------------------------------------------------- directories with links


def test_import_reports_dangling_and_looping_links(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes((EXAMPLES / "branching.jsonl").read_bytes())
    (folder / "dangling.jsonl").symlink_to(folder / "gone.jsonl")
    (folder / "loop-a.jsonl").symlink_to(folder / "loop-b.jsonl")
    (folder / "loop-b.jsonl").symlink_to(folder / "loop-a.jsonl")
    result = invoke("--store", f"sqlite:///{tmp_path / 's.db'}", "import", str(folder), "--json")
    assert result.exit_code == 1
    rows = {Path(row["path"]).name: row for row in json.loads(result.stdout)["files"]}
    assert rows["good.jsonl"]["status"] == "imported"
    assert rows["dangling.jsonl"]["status"] == "rejected"
    assert "dangling symbolic link" in rows["dangling.jsonl"]["reason"]
    assert rows["loop-a.jsonl"]["reason"] == "symbolic link loop"
    assert rows["loop-b.jsonl"]["reason"] == "symbolic link loop"
    assert len(rows) == 4


def test_check_reports_a_dangling_link_in_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "dangling.jsonl").symlink_to(folder / "gone.jsonl")
    result = invoke("check", str(folder))
    assert result.exit_code == 1
    assert "dangling symbolic link" in result.stdout
