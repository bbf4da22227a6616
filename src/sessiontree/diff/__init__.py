"""Comparing branches: two branches of a session, or a fork and its source, with what
each one cost (docs/diff.md). Reads through the store protocol only."""

from sessiontree.diff.branches import BranchComparison, DiffInputError, diff_branches

__all__ = ["BranchComparison", "DiffInputError", "diff_branches"]
