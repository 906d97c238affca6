"""Entries for public functions that are not ops (filled in below)."""


def function_entries() -> dict:
    return {}
