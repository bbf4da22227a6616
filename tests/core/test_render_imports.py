"""The plain renderings do not load rich (docs/architecture.md, "core": ``render`` vs ``styled``):
``diff --json`` and the Markdown export import ``core.render`` and ``compare.branches``, and rich
costs them a tenth of a second of start-up (benchmarks/README.md, "Round five")."""

from __future__ import annotations

import subprocess
import sys


def test_render_and_the_comparison_do_not_import_rich():
    code = ("import sys, sessiontree.core.render, sessiontree.diff.branches; "
            "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_styled_renderings_still_come_with_rich():
    code = "import sys, sessiontree.core.styled; print('rich.text' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
