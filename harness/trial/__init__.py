"""One trial: the runner, the recorder, the history it leaves, its directory on disk."""
