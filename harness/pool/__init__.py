"""How many trials run at once: the job pool's measured concurrency."""
