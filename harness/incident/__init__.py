"""Incidents: a run's tables or trace as a replayable scenario, and its replay."""
