"""The reply sink: where a run's final reply is delivered, with a ledger of deliveries.

The sink does not deduplicate: every accepted `POST /replies` is a delivery, so a blind
resend is visible to the `reply.single_delivery` checker. A missing `Idempotency-Key` is
accepted (key None) and left for the checker to flag. `GET /replies/{key}` answers only
when the scenario's sink is queryable.
"""

from __future__ import annotations

import threading

from harness.scenario import schema
from harness.world import auth, http, ledger
from harness.world import hooks as hooks_module

IDEMPOTENCY_HEADER = "Idempotency-Key"


class ReplySink(http.Service):
    def __init__(
        self,
        spec: schema.SinkSpec,
        *,
        counter: ledger.SequenceCounter | None = None,
        hooks: hooks_module.WorldHooks | None = None,
        guard: auth.Guard | None = None,
    ) -> None:
        self.spec = spec
        self.hooks = hooks or hooks_module.WorldHooks()
        self.ledger = ledger.Ledger(counter)
        self._lock = threading.Lock()
        self._delivered: set[str] = set()
        self._server = http.JsonServer(
            "sink",
            [
                http.Route("POST", "/replies", self._deliver),
                http.Route("GET", "/replies/{key}", self._query),
            ],
            guard=guard,
        )

    def entries(self) -> list[ledger.ReplyRequest | ledger.ReplyDelivery | ledger.ReplyQuery]:
        kinds = (ledger.ReplyRequest, ledger.ReplyDelivery, ledger.ReplyQuery)
        return [e for e in self.ledger.snapshot() if isinstance(e, kinds)]

    def _deliver(self, request: http.Request) -> http.Response:
        key = request.header(IDEMPOTENCY_HEADER) or None
        try:
            body = request.json_object()
            content, run_id = body.get("content"), body.get("run_id")
            if not isinstance(content, str):
                raise http.HttpError(400, "'content' must be a string")
            if run_id is not None and not isinstance(run_id, str):
                raise http.HttpError(400, "'run_id' must be a string")
        except http.HttpError as error:
            self.ledger.append(
                ledger.ReplyRequest(
                    key=key, run_id=None, content=None, status_code=error.status, outcome="rejected"
                )
            )
            raise
        if not self._server.pause(self.spec.latency_ms / 1000):
            raise http.Abandon()
        with self._lock:
            entry = self.ledger.append(
                ledger.ReplyRequest(
                    key=key, run_id=run_id, content=content, status_code=200, outcome="delivered"
                )
            )
            delivery = self.ledger.append(
                ledger.ReplyDelivery(key=key, run_id=run_id, content=content, request_seq=entry.seq)
            )
            if key:
                self._delivered.add(key)
        # Delivered now; a kill in the hook loses only the acknowledgement.
        hooks_module.call(self.hooks.reply_accepted, delivery, name="reply_accepted")
        return http.Response(200, {"delivered": True})

    def _query(self, request: http.Request) -> http.Response:
        key = request.params["key"]
        if not self.spec.queryable:
            self.ledger.append(ledger.ReplyQuery(key=key, found=False, status_code=405))
            raise http.HttpError(405, "this scenario's reply sink cannot be queried by key")
        with self._lock:
            found = key in self._delivered
            status = 200 if found else 404
            self.ledger.append(ledger.ReplyQuery(key=key, found=found, status_code=status))
        return http.Response(status, {"delivered": found})
