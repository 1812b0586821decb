"""Shards' results combined: merge of matrix, certify and explore runs."""
