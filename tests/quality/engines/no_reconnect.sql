-- Named queries of the broken variant no_reconnect (tests/quality/engines).

-- name: server_restarted_since
SELECT pg_postmaster_start_time() > to_timestamp(%(process_started)s) AS restarted;
