"""Bounded readers and validation of everything a user gives crashcert."""
