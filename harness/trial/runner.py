"""One trial end to end: a fresh database and world, workers under a fault plan, a verdict.

The runner only wires the roles together: the world records what happened outside, the
control channel records boundary hits, the nemesis applies the plan, the checkers judge
the resulting history, and the store writes it all to the trial directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import shlex
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pydantic

from harness import errors
from harness.checkers import judge
from harness.checkers import verdict as verdict_module
from harness.contract import run_report
from harness.engines import blackbox as blackbox_engine
from harness.faults import spec as fault_spec
from harness.lab import (
    database_links,
    failover,
    faketime,
    isolation,
    processes,
    shared,
    store_links,
    world_links,
)
from harness.lab import launcher as launcher_module
from harness.lab.postgres import dsn as pg_dsn
from harness.nemesis import nemesis as nemesis_module
from harness.nemesis import world_trigger
from harness.planning import plan as plan_module
from harness.record import history, resubmit
from harness.record import recorder as recorder_module
from harness.scenario import schema
from harness.trial import actions, control, interrupt, retention
from harness.trial import artifacts as store
from harness.trial import closing as closing_module
from harness.world import world as world_module

log = logging.getLogger(__name__)

# How often the runner asks the engine for a report when no run.finished signal came.
REPORT_POLL_S = 2.0
# A black-box engine sends no run.finished signal: its reports are the only sign of the end.
BLACK_BOX_POLL_S = 1.0
# ... but the world sees its reply arrive, and the run ends right after: from then on the
# runner asks at once and backs off from FIRST_ASK_S to BLACK_BOX_POLL_S, so a black-box
# trial does not wait out half a poll on average, and an engine whose status is a process
# per call pays a handful of extra calls per reply.
FIRST_ASK_S = 0.05
# Allowance on top of the scenario deadline for recovery: a few leases.
LEASES_OF_SLACK = 4
# Worker logs live in this subdirectory of the trial directory.
WORKER_LOGS = "workers"
# What of a crashed worker's log goes into the history (the whole log stays in WORKER_LOGS).
LOG_TAIL_LINES = 12
LOG_TAIL_BYTES = 8192
LOG_LINE_CHARS = 400


class TrialSpec(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    scenario: schema.Scenario
    plan: list[fault_spec.FaultStep] = pydantic.Field(default_factory=list)
    seed: int = 0
    label: str = "baseline"
    # A standby worker is running from the start, so recovery costs no process start-up.
    initial_workers: int = 2
    # How the user named scenario and engine, for the reproduction command.
    scenario_ref: str | None = None
    engine_ref: str = "reference"

    @classmethod
    def under(cls, scenario: schema.Scenario, faults: Sequence[str], **fields: Any) -> TrialSpec:
        """The scenario under faults written as text (`kill@tool.returned#2`), labelled so."""
        steps = [fault_spec.parse(text) for text in faults]
        fault_spec.check_plan(faults, steps)
        return cls(scenario=scenario, plan=steps, label=plan_module.plan_label(steps), **fields)


class TrialOutcome(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)

    spec: TrialSpec
    history: history.TrialHistory
    results: list[verdict_module.CheckResult]
    verdict: verdict_module.Verdict
    directory: pathlib.Path
    repro: str

    @property
    def failing(self) -> list[verdict_module.CheckResult]:
        return [r for r in self.results if r.verdict is not verdict_module.Verdict.PASS]


class TrialNotStored(errors.CrashcertError):
    """The trial ran and was judged, but its directory could not be written (a full disk):
    the outcome comes along, so the verdict is still printed before the error."""

    def __init__(self, message: str, outcome: TrialOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome


def repro_command(
    spec: TrialSpec, *, trial: history.TrialHistory | None = None, black_box: bool = False
) -> str:
    """One command that reruns the trial. With its history, a time kill reruns at the world
    point it landed after (plan.rerun_step); the plan and label keep the time point. A trial
    that drove a boundary-reporting engine as a black box reruns as one (`--black-box`), and
    one whose user turned the private network off keeps it off (the engine may need it)."""
    argv = ["crashcert"]
    if isolation.current().chosen == isolation.OFF:
        argv += ["--isolation", isolation.OFF]
    argv += ["run", "--engine", spec.engine_ref]
    if black_box:
        argv += ["--black-box"]
    argv += ["--scenario", spec.scenario_ref or spec.scenario.name]
    moved = []
    for step in spec.plan:
        rerun = step if trial is None else plan_module.rerun_step(trial, step)
        argv += ["--fault", rerun.label()]
        if rerun != step:
            moved.append(f"{step.label()} landed after {rerun.point}#{rerun.occurrence}")
    argv += ["--seed", str(spec.seed)]
    # A world point is not a moment: the rerun strikes at the event, before what followed it.
    note = f"  # a different trial: {'; '.join(moved)}; this strikes at it" if moved else ""
    return shlex.join(argv) + note


def build_input(scenario: schema.Scenario, run_key: str) -> run_report.RunInput:
    user = schema.substitute_run_key(scenario.input.user, run_key)
    return run_report.RunInput(
        run_key=run_key,
        messages=[
            {"role": "system", "content": scenario.input.system},
            {"role": "user", "content": f"{user}\n\n{world_module.run_marker(run_key)}"},
        ],
        budgets=scenario.budgets,
        max_attempts=scenario.max_attempts,
    )


def run_trial(lab: shared.Lab, spec: TrialSpec, *, out_dir: pathlib.Path) -> TrialOutcome:
    trial_id = uuid.uuid4().hex[:10]
    black_box = isinstance(lab.engine, blackbox_engine.BlackBoxEngine)
    directory = store.claim_directory(
        out_dir / store.safe_name(spec.scenario.name) / store.safe_name(spec.label)
    )
    trial = history.TrialHistory(
        trial_id=trial_id,
        engine=lab.engine.name,
        scenario=spec.scenario,
        plan=spec.plan,
        seed=spec.seed,
        declared_boundaries=list(blackbox_engine.declared_boundaries(lab.engine)),
        run_key=f"{spec.scenario.name}-{trial_id}",
        started_at=time.time(),
    )
    restarts_postgres = any(step.action in fault_spec.STOPS_POSTGRES for step in spec.plan)
    try:
        with lab.gate.hold(exclusive=restarts_postgres) as held:
            _execute(lab, spec, trial, directory, held.downgrade)
    except KeyboardInterrupt:
        trial.interrupted = interrupt.NOTE
        _finish(trial, spec, directory, black_box=black_box)  # stored, then the stop goes on
        raise
    except Exception as error:  # the harness or the environment broke: ERROR, never PASS
        if interrupt.requested():
            trial.interrupted = interrupt.NOTE  # what broke was torn down by the stop
        else:
            log.exception("trial %s failed to run", trial_id)
            trial.harness_error = f"{type(error).__name__}: {error}"
    return _finish(trial, spec, directory, black_box=black_box)


def _finish(
    trial: history.TrialHistory, spec: TrialSpec, directory: pathlib.Path, *, black_box: bool
) -> TrialOutcome:
    """Judge the trial and store its directory."""
    trial.ended_at = time.time()
    results, verdict = judge.judge(trial)
    repro = repro_command(spec, trial=trial, black_box=black_box)
    outcome = TrialOutcome(
        spec=spec,
        history=trial,
        results=results,
        verdict=verdict,
        directory=directory,
        repro=repro,
    )
    try:
        store.write_trial(
            directory,
            trial,
            verdicts=[result.model_dump(mode="json") for result in results],
            verdict=verdict.value,
            repro=repro,
        )
    except errors.CrashcertError as error:  # a full disk: the path is named, the verdict kept
        raise TrialNotStored(str(error), outcome) from None
    return outcome


@dataclasses.dataclass
class _Live:
    """The parts of one live trial, started in order by `_start` and stopped by `_stop`."""

    closing: closing_module.Closing
    world: world_module.World
    recorder: recorder_module.Recorder
    proxies: database_links.DatabaseLinks
    server: control.ControlServer
    launcher: launcher_module.Launcher
    nemesis: nemesis_module.Nemesis
    trigger: world_trigger.WorldTrigger | None


def _execute(
    lab: shared.Lab,
    spec: TrialSpec,
    trial: history.TrialHistory,
    directory: pathlib.Path,
    postgres_back: Callable[[], None],  # no more Postgres stops: run beside the others
) -> None:
    """Start the trial's parts, drive its run to the end, stop them, read the outcome."""
    engine = lab.engine
    database = f"cc_trial_{trial.trial_id}"
    dsn = lab.clone_database(database)
    with contextlib.ExitStack() as stack:
        stack.callback(_quietly, lab.drop_database, database)
        standby = failover.for_plan(lab, spec.plan, database, stack)  # before the drop
        dsn = dsn if standby is None else standby.harness_dsn(dsn)  # follows a promotion
        stack.callback(_quietly, blackbox_engine.done_with, engine, dsn)  # before the drop
        live = _start(lab, spec, trial, directory, (dsn, database), stack, standby, postgres_back)
        purged = False
        try:
            purged = _drive(engine, dsn, trial, live, spec, directory)
        finally:
            _stop(trial, live)
        if trial.run_id is not None and not purged:  # a purged run's were taken before
            trial.reports.append(engine.report(dsn, trial.run_id))
            trial.engine_tables = engine.export(dsn, trial.run_id)
        if live.server.protocol_errors:
            raise errors.CrashcertError("; ".join(live.server.protocol_errors[:3]))


def _start(
    lab: shared.Lab,
    spec: TrialSpec,
    trial: history.TrialHistory,
    directory: pathlib.Path,
    where: tuple[str, str],  # the trial database's dsn and name
    stack: contextlib.ExitStack,
    standby: failover.Failover | None,
    postgres_back: Callable[[], None],
) -> _Live:
    """The world, the links, the engine's own store, the control channel, the launcher and
    the nemesis (and the world trigger for black-box points); each undone by `stack`."""
    engine, (dsn, database) = lab.engine, where
    closing = closing_module.Closing()
    world = world_module.World(spec.scenario)
    world.start()
    stack.callback(closing.finish, world.stop)
    recorder = recorder_module.Recorder(world.counter)
    proxies = database_links.DatabaseLinks(lab, dsn, prefix=database)
    stack.callback(closing.finish, proxies.close)
    # Only for a plan that cuts a world link or skews a clock: others keep it direct.
    links = world_links.for_plan(lab.toxiproxy, world.env(), spec.plan, prefix=database)
    if links is not None:
        stack.callback(links.close)
    clocks = faketime.for_plan(spec.plan)
    if clocks is not None:
        stack.callback(clocks.close)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)  # its logs and history are this user's alone
    # The engine's own store, when it names a server: started and ready first.
    own_store = store_links.for_trial(engine, lab.toxiproxy, directory, prefix=database)
    if own_store is not None:
        stack.callback(own_store.server.stop)
        stack.callback(own_store.close)
        _bind_store(engine, dsn, own_store.server.env())
        stack.callback(_bind_store, engine, dsn, None)
    server = control.ControlServer(recorder).start()
    stack.callback(closing.finish, server.stop)
    launcher = launcher_module.Launcher(
        engine,
        world_env=world.env(),
        control_path=server.path if engine.boundaries else None,
        dsn_for_worker=proxies.dsn_for,
        log_dir=directory / WORKER_LOGS,
        recorder=recorder,
        trial_id=trial.trial_id,
        forkserver=lab.forkserver,
        world_links=links,
        clocks=clocks,
        store_links=own_store,
    )
    nemesis = nemesis_module.Nemesis(
        spec.plan,
        launcher=launcher,
        recorder=recorder,
        proxies=proxies,
        pg=lab.pg,
        lease_s=engine.lease_ms / 1000.0,
        dsn=dsn,
        world_links=links,
        clocks=clocks,
        store_links=own_store,
        world_tools=world.tools,
        failover=standby,
        postgres_back=postgres_back,
    )
    server.set_policy(nemesis.on_hit)
    stack.callback(nemesis.close)  # runs first: heal everything before anything stops
    trigger = None
    if blackbox_engine.wanted(engine, spec.plan):
        trigger = world_trigger.WorldTrigger(
            world,
            spec.plan,
            run_key=trial.run_key,
            recorder=recorder,
            launcher=launcher,
            policy=nemesis.on_hit,
        ).install()
    return _Live(closing, world, recorder, proxies, server, launcher, nemesis, trigger)


def _drive(
    engine: Any,
    dsn: str,
    trial: history.TrialHistory,
    live: _Live,
    spec: TrialSpec,
    directory: pathlib.Path,
) -> bool:
    """Submit the run (and any planned resubmit), start the workers, wait until it is
    terminal, then the scenario's later actions; True when one purged the run."""
    server, launcher, recorder = live.server, live.launcher, live.recorder
    run_input = build_input(spec.scenario, trial.run_key)
    run_id = engine.submit(dsn, run_input)
    trial.run_id = run_id
    for step in resubmit.planned(spec.plan, resubmit.AT_ONCE):
        resubmit.resubmit(engine, dsn, run_input, step, first_run_id=run_id, recorder=recorder)
    for _ in range(spec.initial_workers):
        launcher.start()
    trial.workers_started_at = time.time()
    _wait_terminal(engine, dsn, trial, server, launcher, recorder, spec)
    _resubmit_after_finish(engine, dsn, trial, run_input, server, recorder, spec)
    return _after_finish_actions(
        engine, dsn, trial, launcher, server, recorder, spec, directory / WORKER_LOGS
    )


def _stop(trial: history.TrialHistory, live: _Live) -> None:
    """Heal, stop every worker, and take what was recorded and what the world saw."""
    if live.trigger is not None:
        live.trigger.close()  # first: no late world kill or fresh worker after this
    try:
        live.nemesis.close()
        _record_crashes(live.launcher, live.recorder, replace=False)  # died since the last look
    finally:
        live.launcher.close()
    trial.events = live.recorder.events()
    trial.containment = live.launcher.describe_containment()
    faults = trial.faults()
    trial.healed_at = max(fault.t for fault in faults) if faults else None
    snapshot = live.world.snapshot()
    trial.model, trial.tools, trial.sink = snapshot.model, snapshot.tools, snapshot.sink
    trial.foreign = snapshot.foreign
    # Every worker is dead and recorded, the faults healed: what stops now decides
    # nothing, so it stops while the final report and tables are read.
    if live.launcher.workers.alive():
        raise errors.CrashcertError("a worker outlived the trial's teardown")
    for stop in (live.world.stop, live.server.stop, live.proxies.close):
        live.closing.begin(stop)


def _after_finish_actions(
    engine: Any,
    dsn: str,
    trial: history.TrialHistory,
    launcher: launcher_module.Launcher,
    server: control.ControlServer,
    recorder: recorder_module.Recorder,
    spec: TrialSpec,
    log_dir: pathlib.Path,
) -> bool:
    """The scenario's purge and reuse_key, once the run was seen terminal; whether the run
    was purged (its final report and tables are taken first: nothing is left after)."""
    wanted = retention.wanted(spec.scenario)
    if not wanted or trial.finished_at is None or trial.run_id is None:
        return False
    slack = LEASES_OF_SLACK * engine.lease_ms / 1000.0
    after = retention.Retention(
        engine,
        dsn,
        trial,
        launcher=launcher,
        recorder=recorder,
        server=server,
        log_dir=log_dir,
        build_input=build_input,
        deadline=time.monotonic() + spec.scenario.deadline_s + slack,
        poll_s=REPORT_POLL_S,
    )
    run_id = trial.run_id
    trial.reports.append(after.retrying(lambda: engine.report(dsn, run_id)))
    trial.engine_tables = after.retrying(lambda: engine.export(dsn, run_id))
    after.run()
    return after.purged


def _resubmit_after_finish(
    engine: Any,
    dsn: str,
    trial: history.TrialHistory,
    run_input: run_report.RunInput,
    server: control.ControlServer,
    recorder: recorder_module.Recorder,
    spec: TrialSpec,
) -> None:
    """`submit_twice@run?when=after_finish`, once the run was seen terminal (else it never
    strikes: plan.applied says so), then whatever run it answered is let end."""
    steps = resubmit.planned(spec.plan, resubmit.AFTER_FINISH)
    if not steps or trial.finished_at is None or trial.run_id is None:
        return
    answered = [
        resubmit.resubmit(
            engine, dsn, run_input, step, first_run_id=trial.run_id, recorder=recorder
        )
        for step in steps
    ]
    slack = LEASES_OF_SLACK * engine.lease_ms / 1000.0
    resubmit.await_terminal(
        engine,
        dsn,
        [run_id for run_id in answered if run_id is not None],
        server=server,
        deadline=time.monotonic() + spec.scenario.deadline_s + slack,
        poll_s=REPORT_POLL_S,
    )


def _wait_terminal(
    engine: Any,
    dsn: str,
    trial: history.TrialHistory,
    server: control.ControlServer,
    launcher: launcher_module.Launcher,
    recorder: recorder_module.Recorder,
    spec: TrialSpec,
) -> None:
    """Wait for run.finished (a signal), asking for reports now and then as a fallback."""
    assert trial.run_id is not None
    run_id = trial.run_id
    slack = LEASES_OF_SLACK * engine.lease_ms / 1000.0
    deadline = time.monotonic() + spec.scenario.deadline_s + slack
    actor = actions.Actor(engine, dsn, run_id, spec.scenario, recorder)
    try:
        _poll_until_terminal(engine, dsn, trial, server, launcher, recorder, deadline, actor)
    finally:
        actor.close()


def _poll_until_terminal(
    engine: Any,
    dsn: str,
    trial: history.TrialHistory,
    server: control.ControlServer,
    launcher: launcher_module.Launcher,
    recorder: recorder_module.Recorder,
    deadline: float,
    actor: actions.Actor,
) -> None:
    run_id = trial.run_id
    assert run_id is not None

    replies_seen: list[history.BoundaryHit] = []

    def finished(hit: history.BoundaryHit) -> bool:
        return hit.point == "run.finished" and hit.run_id == run_id

    def finished_or_replied(hit: history.BoundaryHit) -> bool:
        if finished(hit):
            return True
        return hit.point == world_trigger.REPLY_ACCEPTED and all(
            hit is not seen for seen in replies_seen
        )

    next_report = 0.0
    ask_every = BLACK_BOX_POLL_S
    while time.monotonic() < deadline:
        interrupt.check()
        poll = REPORT_POLL_S if engine.boundaries else ask_every
        if actor.waiting:  # look for the action's point often; report as usual
            poll = actions.POLL_S
        timeout = min(poll, max(0.0, deadline - time.monotonic()))
        hit = server.wait_for(finished_or_replied, timeout=timeout)
        if hit is not None and finished(hit):
            trial.finished_at = hit.t
            break
        if hit is not None:  # a reply reached the world: the end is near, ask now
            replies_seen.append(hit)
            ask_every, next_report = FIRST_ASK_S, 0.0
        elif not engine.boundaries:
            ask_every = min(2 * ask_every, BLACK_BOX_POLL_S)
        if actor.waiting:
            actor.step()
            if time.monotonic() < next_report:
                continue
        next_report = time.monotonic() + REPORT_POLL_S
        _record_crashes(launcher, recorder, replace=True)
        try:
            report = engine.report(dsn, run_id)
        except errors.CrashcertError as error:
            # Postgres may be down on purpose (a restart not yet healed): not yet, not broken.
            log.info("run report unavailable, asking again: %s", error)
            continue
        trial.reports.append(report)
        if report.terminal:
            trial.finished_at = time.time()
            break


def _record_crashes(
    launcher: launcher_module.Launcher,
    recorder: recorder_module.Recorder,
    *,
    replace: bool,
) -> None:
    """A worker that died on its own (not killed by us) is replaced, as a supervisor would
    (`replace`, while the run goes on). One that died with a non-zero status is recorded as
    crashed with the tail of its log, so the verdict can point at what broke."""
    for worker in launcher.workers.all():
        if worker.alive or worker.killed or worker.replaced:
            continue
        worker.replaced = True
        if worker.returncode:
            recorder.append(
                history.WorkerEvent(
                    event="crashed",
                    worker_id=worker.worker_id,
                    pid=worker.pid,
                    returncode=worker.returncode,
                    log=f"{WORKER_LOGS}/{worker.log_path.name}",
                    log_tail=log_tail(worker.log_path),
                )
            )
        if replace:
            launcher.start()


def log_tail(path: pathlib.Path) -> list[str]:
    """The last lines of a worker's log, each cut short and scrubbed of DSN secrets."""
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            data = log.read()
    except OSError as error:
        return [f"(log unreadable: {error})"]
    lines = [line.rstrip() for line in data.decode("utf-8", "replace").splitlines()]
    # The engine's own lines: the harness's notes (start, signals) say nothing of why it died.
    lines = [line for line in lines if line.strip() and not line.startswith(processes.NOTE_PREFIX)]
    lines = lines[-LOG_TAIL_LINES:]
    return [pg_dsn.redact_text(line[:LOG_LINE_CHARS]) for line in lines]


def _bind_store(engine: Any, dsn: str, env: dict[str, str] | None) -> None:
    """The trial's store addresses for the engine's commands (None: unbind)."""
    binding = getattr(engine, "bind_store", None)
    if binding is not None:
        binding(dsn, env)


def _quietly(function: Any, *args: Any) -> None:
    try:
        function(*args)
    except Exception as error:  # cleanup must not hide the trial's own outcome
        log.debug("cleanup step failed: %s", error)
