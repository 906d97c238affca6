"""Indexing: subscripts, gather/scatter, sorting and searching, index builders, combinatorics."""
