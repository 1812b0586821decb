"""One trial's history: the records every role appends and the checkers read."""
