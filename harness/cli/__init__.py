"""`crashcert`: the command line."""
