"""The engine's one error family: everything it raises on purpose is an EngineError."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class ConfigError(EngineError):
    """The environment or the command line is unusable."""


class InvalidInput(EngineError):
    """A submitted RunInput is malformed or too large; nothing was stored."""


class CheckpointInvalid(EngineError):
    """Durable state does not make sense (unknown version, malformed, audit mismatch).

    The engine fails the run with this message instead of guessing.
    """


class LeaseLost(EngineError):
    """This worker no longer holds the run's lease; it must stop touching the run."""


class RunCancelled(EngineError):
    """The run was cancelled (by this transition honouring a request, or earlier)."""


class StaleState(EngineError):
    """A compare-and-set found durable state newer than the view it was based on."""


class DatabaseUnavailable(EngineError):
    """Postgres is unreachable or dropped the connection; the outcome of an in-flight
    commit is unknown, so the caller must reconnect and re-read durable state."""


class RetryableConflict(EngineError):
    """Serialization failure or deadlock (SQLSTATE 40001/40P01): retry the transaction."""


class NotFound(EngineError):
    """No run or command with that id."""


class Conflict(EngineError):
    """A command does not apply to the current state (e.g. approving a settled call)."""


class WorldError(EngineError):
    """A world service answered outside its protocol."""


class ModelUnavailable(EngineError):
    """Transient model failures outlasted the retry bound; the run is retried later."""


class ModelAnswerLost(EngineError):
    """The request left and may have been answered (and billed), but no whole answer came
    back: reset, timed out, or a stream cut short. The call is closed and a new one opened,
    so every inference that may have been served holds an iteration of its own."""


class ModelRefused(EngineError):
    """The model rejected the request itself (4xx other than 408/409/429)."""


class ServiceUnavailable(EngineError):
    """A world service could not be reached within the retry bound; try the run later."""
