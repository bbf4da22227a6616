"""Install the reference implementation (the original agent's package) for the benchmarks.

``@earendil-works/pi-coding-agent`` comes from the npm registry through
``npm`` itself, into ``benchmarks/.work/reference/<version>/`` (git-ignored),
once; later runs reuse it. Only its ``dist/core/session-manager.js`` is
used, imported by file path from ``node/driver.mjs``: the package's index
needs a newer Node than 20, the session manager module does not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

PACKAGE = "@earendil-works/pi-coding-agent"
MODULE = os.path.join("dist", "core", "session-manager.js")


def _npm(*args: str, cwd: str | None = None) -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the reference side needs Node.js and npm")
    done = subprocess.run([npm, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"npm {' '.join(args)} failed:\n{done.stderr.strip()[-2000:]}")
    return done.stdout


def latest_version() -> str:
    """The registry's current version of the package (``npm view``)."""
    return json.loads(_npm("view", PACKAGE, "version", "--json"))


def ensure_reference(work_dir: str, version: str | None = None, *, log=print) -> tuple[str, str]:
    """Install the package once under ``work_dir``; return ``(module path, version)``.

    Args:
        work_dir: ``benchmarks/.work``.
        version: a version to use; default: a cached one if any, else the latest.
    """
    root = os.path.join(work_dir, "reference")
    if version is None and os.path.isdir(root):
        cached = sorted(name for name in os.listdir(root)
                        if os.path.isfile(os.path.join(root, name, "node_modules", *PACKAGE.split("/"), MODULE)))
        if cached:
            version = cached[-1]
    if version is None:
        version = latest_version()
    target = os.path.join(root, version)
    module = os.path.join(target, "node_modules", *PACKAGE.split("/"), MODULE)
    if os.path.isfile(module):
        return module, version
    os.makedirs(root, exist_ok=True)
    log(f"installing {PACKAGE}@{version} from the npm registry into {target} ...")
    staging = tempfile.mkdtemp(prefix="install-", dir=root)
    try:
        # --ignore-scripts: only JavaScript files are needed; --engine-strict off: Node 20 is
        # older than the package asks for, and only session-manager.js is loaded.
        _npm("install", "--prefix", staging, "--no-audit", "--no-fund", "--ignore-scripts", "--no-save",
             f"{PACKAGE}@{version}")
        if not os.path.isfile(os.path.join(staging, "node_modules", *PACKAGE.split("/"), MODULE)):
            raise RuntimeError(f"{PACKAGE}@{version} has no {MODULE}")
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
    return module, version


if __name__ == "__main__":
    # `python benchmarks/reference.py [VERSION]`: install (or find) the package in benchmarks/.work,
    # as .ci/run does before the tests that load files with the agent's own SessionManager.
    import sys

    found, installed = ensure_reference(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".work"),
                                        sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"{PACKAGE}@{installed}: {found}")
