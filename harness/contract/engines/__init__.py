"""Engine adapters: how the harness migrates, starts, submits to and reads an engine."""
