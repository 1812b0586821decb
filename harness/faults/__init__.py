"""Faults: the one grammar and catalog, plans (which fault where), the nemesis that applies them."""
