"""Scenario files: the format of a scripted agent task, and reading user files at the edge."""
