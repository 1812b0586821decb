"""crashcert harness: runs engine workers under faults and judges them against the world."""
