"""Reductions and scans, and what is composed from them: statistics, numerical integration."""
