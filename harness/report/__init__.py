"""Output: the terminal, JSON/JUnit summaries, HTML timelines."""
