"""An upgrade between the crash and the resume: the run started by version N is resumed by
version N+1 (the engine description's `upgrade`: a new worker, a migration), and the
release ships new versions of its tools (the world declares every tool anew, so a new
fingerprint). Engines replay old decisions into new code; this fault shows whether they do.
"""

from __future__ import annotations

from harness import errors
from harness.nemesis import strike as strike_module

# The release the world's tools are redeployed at: `1` becomes `1+next`.
RELEASE = "next"


class Upgrade(strike_module.Kind):
    """SIGKILL the held worker (recorded as the kill it is: the checkers judge a dead worker
    as dead) and every other worker of version N (a deploy replacing its pods), run the
    next version's migration, redeploy the world's tools, and start as many workers as were
    alive, all of the next version (recorded as `upgraded`)."""

    def apply(self, strike: strike_module.Strike) -> None:
        worker, parts = strike.worker, strike.parts
        launcher = parts.launcher
        if not launcher.can_upgrade():
            raise strike_module.NotApplied(
                "the engine names no next version (`upgrade:` in its description)"
            )
        worker.kill()
        strike.record("kill", ok=True, note=f"SIGKILL process group {worker.pgid} (upgrade)")
        # At once, before the held worker's lease lapses: no worker of version N may adopt
        # the run, so the resume is the next version's (the deploy replaces them itself).
        stopped = [other for other in launcher.workers.alive() if other is not worker]
        for other in stopped:
            other.kill()
        try:
            migrated = launcher.upgrade(parts.dsn)
        except errors.CrashcertError as error:
            # The next version cannot start on this database: no worker of either version
            # runs, so the run stays where the crash left it (run.liveness says so).
            strike.record("upgraded", ok=False, note=f"next version's migration failed: {error}")
            return
        changed = parts.world_tools.upgrade(RELEASE) if parts.world_tools is not None else []
        started = [launcher.start() for _ in range(1 + len(stopped))]
        tools = ", ".join(f"{entry.tool} -> {entry.version}" for entry in changed) or "none"
        note = (
            f"SIGKILL {len(stopped)} other worker(s) of version N; {migrated}; tools "
            f"redeployed: {tools}; started {len(started)} worker(s) of the next version "
            f"(pids {', '.join(str(each.pid) for each in started)})"
        )
        strike.record(
            "upgraded",
            ok=True,
            note=note,
            observed={"tools": {entry.tool: entry.fingerprint for entry in changed}},
        )
