-- The example agents' own tables (OpenAI Agents SDK, Pydantic AI, LangGraph): leased runs
-- (both variants); hardened: model attempts, recorded model answers (the two without durable
-- resume replay from them), tool journal, outbox. LangGraph's checkpoints are its own tables.
-- One statement per `-- name:` section (store.py).

-- name: schema
CREATE TABLE IF NOT EXISTS agent_runs (
    run_key text PRIMARY KEY,
    input jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    owner text,
    lease_until timestamptz,
    attempts int NOT NULL DEFAULT 0,
    report jsonb
);
CREATE TABLE IF NOT EXISTS agent_model_attempts (
    run_key text PRIMARY KEY,
    attempts int NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_model_answers (
    run_key text NOT NULL,
    turn int NOT NULL,
    answer jsonb NOT NULL,
    PRIMARY KEY (run_key, turn)
);
CREATE TABLE IF NOT EXISTS agent_tool_journal (
    key text PRIMARY KEY,
    run_key text NOT NULL,
    tool_call_id text NOT NULL,
    name text NOT NULL,
    seq bigserial,
    state text NOT NULL,
    content text
);
CREATE TABLE IF NOT EXISTS agent_outbox (
    run_key text PRIMARY KEY,
    key text NOT NULL,
    state text NOT NULL
);

-- name: submit
INSERT INTO agent_runs (run_key, input) VALUES (%(run_key)s, %(input)s)
ON CONFLICT (run_key) DO NOTHING

-- name: claim
UPDATE agent_runs
SET owner = %(owner)s, lease_until = now() + make_interval(secs => %(lease_s)s),
    attempts = attempts + 1, status = 'running'
WHERE run_key = (
    SELECT run_key FROM agent_runs
    WHERE status IN ('pending', 'running') AND (lease_until IS NULL OR lease_until < now())
    ORDER BY run_key LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING run_key, input, attempts

-- name: renew
UPDATE agent_runs SET lease_until = now() + make_interval(secs => %(lease_s)s)
WHERE run_key = %(run_key)s AND owner = %(owner)s AND status = 'running'
RETURNING run_key

-- name: fence
SELECT run_key FROM agent_runs
WHERE run_key = %(run_key)s AND owner = %(owner)s AND status = 'running' AND lease_until > now()
FOR SHARE

-- name: save_report
UPDATE agent_runs SET report = %(report)s
WHERE run_key = %(run_key)s AND owner = %(owner)s AND status = 'running'

-- name: finish
UPDATE agent_runs SET status = %(status)s, report = %(report)s, lease_until = NULL
WHERE run_key = %(run_key)s AND owner = %(owner)s AND status = 'running'
RETURNING run_key

-- name: status
SELECT status, report, attempts FROM agent_runs WHERE run_key = %(run_key)s

-- name: reserve_model
INSERT INTO agent_model_attempts (run_key, attempts) VALUES (%(run_key)s, 1)
ON CONFLICT (run_key) DO UPDATE SET attempts = agent_model_attempts.attempts + 1
RETURNING attempts

-- name: model_attempts
SELECT attempts FROM agent_model_attempts WHERE run_key = %(run_key)s

-- name: answer_get
SELECT answer FROM agent_model_answers WHERE run_key = %(run_key)s AND turn = %(turn)s

-- name: answer_record
INSERT INTO agent_model_answers (run_key, turn, answer) VALUES (%(run_key)s, %(turn)s, %(answer)s)
ON CONFLICT (run_key, turn) DO NOTHING

-- name: answers
SELECT turn, answer FROM agent_model_answers WHERE run_key = %(run_key)s ORDER BY turn

-- name: tool_start
INSERT INTO agent_tool_journal (key, run_key, tool_call_id, name, state)
VALUES (%(key)s, %(run_key)s, %(tool_call_id)s, %(name)s, 'started')
ON CONFLICT (key) DO NOTHING

-- name: tool_get
SELECT state, content FROM agent_tool_journal WHERE key = %(key)s

-- name: tool_settle
UPDATE agent_tool_journal SET state = %(state)s, content = %(content)s WHERE key = %(key)s

-- name: tool_calls
SELECT tool_call_id, name, key, state FROM agent_tool_journal
WHERE run_key = %(run_key)s ORDER BY seq

-- name: outbox_get
SELECT key, state FROM agent_outbox WHERE run_key = %(run_key)s

-- name: outbox_sending
INSERT INTO agent_outbox (run_key, key, state) VALUES (%(run_key)s, %(key)s, 'sending')
ON CONFLICT (run_key) DO NOTHING

-- name: outbox_settle
UPDATE agent_outbox SET state = %(state)s WHERE run_key = %(run_key)s
