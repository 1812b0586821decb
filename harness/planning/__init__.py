"""Which faults where, seeded and pure: plans, reruns and the split into shards."""
