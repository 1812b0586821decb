"""Campaigns over the one trial runner: matrix, certify, explore, soak, incident."""
