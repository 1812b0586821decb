"""The SCRAM-SHA-256 verifier of an embedded cluster's password, stored as is.

PBKDF2's iteration count (Postgres's default 4096) slows guessing a human's password from a
leaked verifier or a captured exchange; it buys nothing against a random 256-bit password
(embedded.PASSWORD_BYTES), which no count of guesses reaches. It does cost every connection
~2 ms of client CPU (libpq derives the key on each connect; 0.35 ms at one iteration), about
10 ms of a refund crash trial's ~200 (ci/bench_matrix.py, harness and workers). So the
embedded cluster stores its own random password's verifier with one iteration, computed here
as RFC 5802/7677 and Postgres (src/common/scram-common.c) define it; every connection still
proves the password, and a wrong one is refused as before.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

ITERATIONS = 1  # only for a random password of PASSWORD_BYTES; never for one a person chose
SALT_BYTES = 16  # as Postgres's own (SCRAM_DEFAULT_SALT_LEN)


def verifier(password: str, *, iterations: int = ITERATIONS) -> str:
    """`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, which Postgres stores
    unchanged when it is given as a role's password."""
    salt = os.urandom(SALT_BYTES)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
