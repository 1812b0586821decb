"""The real parts shared by many trials: Postgres, Toxiproxy, the engine's template database.

One Lab serves a whole matrix; each trial gets its own database cloned from the engine's
migrated template, its own world, its own control socket and its own proxies.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from harness import errors
from harness.engines import adapter, blackbox
from harness.lab import gate as gate_module
from harness.lab import postgres, proxy_audit, spawner

log = logging.getLogger(__name__)

# Trial databases kept cloned ahead: enough for the default --jobs 2.
SPARES = 2


class Lab:
    def __init__(
        self,
        *,
        pg: postgres.Server,
        engine: adapter.EngineAdapter,
        template: str,
        toxiproxy: Any | None,
        toxiproxy_note: str,
        forkserver: spawner.ForkServer | None = None,
        gate: gate_module.SharedExclusive | None = None,
        spares: postgres.spares.Spares | None = None,
    ) -> None:
        self.pg = pg
        self.engine = engine
        self.template = template
        self.toxiproxy = toxiproxy  # harness.lab.proxy.Toxiproxy client, or None
        self.toxiproxy_note = toxiproxy_note
        self.forkserver = forkserver
        # Trials on this Postgres hold it shared; one that restarts it holds it alone.
        self.gate = gate or gate_module.SharedExclusive()
        self.spares = spares  # trial databases cloned ahead of time, dropped behind

    def as_black_box(self) -> Lab:
        """The same lab driving its engine as a black box: no control channel, faults from
        the world (CONTRACT.md section 6). An engine that reports nothing already is one."""
        if not self.engine.boundaries:
            return self
        return self.with_engine(blackbox.BlackBoxEngine(self.engine))

    def with_engine(self, engine: adapter.EngineAdapter) -> Lab:
        """The same Postgres, Toxiproxy and template driving another engine's workers.

        Only for engines that share this engine's schema (variants of it); the fork server
        is shared when it imported what the other engine asks to preload (named in this
        engine's preload or imported by it: reference_engine.worker by
        reference_engine.preload).
        """
        shared = self.forkserver
        if shared is not None and (
            not set(engine.preload) <= shared.modules
            or spawner.interpreter(engine.worker_command()) != shared.python
        ):
            shared = None
        return Lab(
            pg=self.pg,
            engine=engine,
            template=self.template,
            toxiproxy=self.toxiproxy,
            toxiproxy_note=self.toxiproxy_note,
            forkserver=shared if engine.preload else None,
            gate=self.gate,
            spares=self.spares,
        )

    def clone_database(self, name: str) -> str:
        if self.spares is not None:
            return self.spares.take(name)
        return postgres.templates.clone(self.pg, self.template, name)

    def drop_database(self, name: str) -> None:
        """Reset for another trial (or dropped) behind the caller's back when spares are
        kept: a trial does not wait."""
        if self.spares is not None:
            self.spares.give_back(name)
        else:
            postgres.templates.drop(self.pg, name)


@contextlib.contextmanager
def open_lab(
    engine: adapter.EngineAdapter,
    *,
    pg_dsn: str | None = None,
    require_toxiproxy: bool = False,
) -> Iterator[Lab]:
    with contextlib.ExitStack() as stack:
        forkserver_ready = _forkserver_starting(stack, engine)
        pg = stack.enter_context(postgres.provide(dsn=pg_dsn))
        template = f"cc_tpl_{engine.name}_{uuid.uuid4().hex[:8]}"
        postgres.templates.ensure_template(pg, template, engine.migrate)
        stack.callback(_drop_template, pg, template)
        toxiproxy, note = _start_toxiproxy(stack, required=require_toxiproxy)
        if toxiproxy is not None:  # exits before the server stops
            stack.enter_context(proxy_audit.at_lab_close(toxiproxy))
        closing = getattr(engine, "close", None)  # a status server, when it has one
        if closing is not None:
            stack.callback(closing)
        gate = gate_module.SharedExclusive()
        spares = postgres.spares.Spares(
            pg, template, size=SPARES, hold=lambda: gate.hold(exclusive=False)
        )
        stack.callback(spares.close)  # before the template and the server go
        forkserver = forkserver_ready()
        yield Lab(
            pg=pg,
            engine=engine,
            template=template,
            toxiproxy=toxiproxy,
            toxiproxy_note=note,
            forkserver=forkserver,
            gate=gate,
            spares=spares,
        )


def _forkserver_starting(
    stack: contextlib.ExitStack, engine: adapter.EngineAdapter
) -> Callable[[], spawner.ForkServer | None]:
    """Start the fork server in a thread and return what waits for it. Its imports (seconds
    for a framework) then overlap initdb and the template instead of adding to them. The
    stack closes it however the lab's opening ends."""
    if not (engine.preload and spawner.forking_enabled()):
        return lambda: None
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="forkserver-start")
    future = pool.submit(_start_forkserver, engine)
    pool.shutdown(wait=False)

    def close() -> None:
        forkserver = future.result()
        if forkserver is not None:
            forkserver.close()

    stack.callback(close)
    return future.result


def _start_forkserver(engine: adapter.EngineAdapter) -> spawner.ForkServer | None:
    """The warm server, under the worker command's interpreter with the engine's env; None
    (workers start with exec, as the command says) when it cannot import the preload: the
    trials still run, and a worker that cannot import either crashes with its own log."""
    python = spawner.interpreter(engine.worker_command())
    env = {**adapter.inherited_environment(), **engine.worker_env()}
    try:
        return spawner.ForkServer(engine.preload, cwd=engine.cwd, python=python, env=env)
    except errors.EnvironmentProblem as error:
        log.warning("%s; workers of %s start with exec instead", error, engine.name)
        return None


def _drop_template(pg: postgres.Server, template: str) -> None:
    try:
        postgres.templates.drop(pg, template)
    except errors.CrashcertError as error:  # the server may already be gone
        log.debug("template %s not dropped: %s", template, error)


def _start_toxiproxy(stack: contextlib.ExitStack, *, required: bool) -> tuple[Any | None, str]:
    """The real Toxiproxy server when it can be had; workers then reach Postgres through it."""
    from harness.lab import toxiproxy_server

    required = required or os.environ.get("CRASHCERT_REQUIRE_TOXIPROXY") == "1"
    try:
        client = stack.enter_context(toxiproxy_server.provide())
    except errors.CrashcertError as error:
        if required:
            raise
        return None, f"Toxiproxy unavailable, workers connect directly: {error}"
    return client, "workers connect through Toxiproxy"
