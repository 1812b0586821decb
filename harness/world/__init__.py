"""The simulated outside world: a scripted model, tool services and a reply sink."""
