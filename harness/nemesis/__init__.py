"""Faults carried out on a live trial: processes, links, servers and the world."""
