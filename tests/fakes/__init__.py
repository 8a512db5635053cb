"""Fake external services used by membridge tests."""

#: How long a test waits for something the program will do before calling it a hang. It is a guard,
#: never an expected duration: waits return as soon as their condition holds, and a busy 2-core
#: machine may take many seconds for a turn that takes 100 ms alone.
HANG_GUARD_S = 60.0
