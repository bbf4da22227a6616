"""The conformance suites: the same tests on every store (``store``) and through both
manager drivers (``manager``); the fixtures are in ``conftest.py`` beside this file."""
