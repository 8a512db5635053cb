"""Fake external services used by membridge tests."""
