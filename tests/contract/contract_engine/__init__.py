"""A crash-safe agent engine in plain Python on PostgreSQL, written from harness/CONTRACT.md.

python -m contract_engine migrate | worker | submit | status RUN_ID
"""
