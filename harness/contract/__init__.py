"""The engine contract: boundaries, RunInput/RunReport, the control channel, engine adapters."""
