"""The real parts: Postgres, Toxiproxy, engine worker processes and their cleanup."""
