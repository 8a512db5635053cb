"""Helpers shared by the test suites (on the path through pytest's ``pythonpath``)."""
