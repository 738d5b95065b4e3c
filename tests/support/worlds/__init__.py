"""Worlds: in-process ledgers with scripted clocks, tokens and executors, shared by the tests."""
