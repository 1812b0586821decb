-- The reference engine's durable state. Constraints make impossible states
-- unrepresentable; the worker's fencing makes stale writers unable to commit.

CREATE TABLE runs (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_key             text NOT NULL UNIQUE CHECK (length(run_key) BETWEEN 1 AND 512),
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN (
                            'pending', 'running', 'waiting', 'succeeded', 'failed',
                            'cancelled', 'dead_lettered', 'delivery_uncertain',
                            'budget_exhausted')),
    reason              text,
    input               jsonb NOT NULL CHECK (jsonb_typeof(input) = 'object'),
    budget_iterations   integer NOT NULL CHECK (budget_iterations >= 1),
    budget_tool_calls   integer NOT NULL CHECK (budget_tool_calls >= 0),
    budget_tokens       bigint NOT NULL CHECK (budget_tokens >= 1),
    attempts            integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts        integer NOT NULL CHECK (max_attempts >= 1),
    lease_owner         text,
    lease_epoch         bigint NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    lease_expires_at    timestamptz,
    available_at        timestamptz NOT NULL DEFAULT now(),
    cancel_requested_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    -- A run is leased exactly when it is running.
    CONSTRAINT runs_running_iff_leased CHECK ((status = 'running') = (lease_owner IS NOT NULL)),
    CONSTRAINT runs_lease_complete CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT runs_terminal_iff_finished CHECK (
        (status IN ('succeeded', 'failed', 'cancelled', 'dead_lettered',
                    'delivery_uncertain', 'budget_exhausted')) = (finished_at IS NOT NULL)),
    CONSTRAINT runs_attempts_bounded CHECK (attempts <= max_attempts)
);

CREATE INDEX runs_claimable ON runs (available_at) WHERE status = 'pending';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

-- The current recovery point of a run: one row, rewritten by each transition.
CREATE TABLE frontiers (
    run_id             uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    version            integer NOT NULL CHECK (version >= 1),
    phase              text NOT NULL CHECK (phase IN (
                           'model_pending', 'tools_pending', 'model_ready', 'reply_ready')),
    checkpoint         jsonb NOT NULL,
    checkpoint_version integer NOT NULL CHECK (checkpoint_version >= 1),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Append-only history of every frontier the run ever had (filled by trigger, so a
-- frontier change without its history row cannot exist).
CREATE TABLE checkpoints (
    run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    version    integer NOT NULL CHECK (version >= 1),
    phase      text NOT NULL,
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, version)
);

CREATE FUNCTION frontier_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.version <> 1 THEN
            RAISE EXCEPTION 'frontier of run % must start at version 1', NEW.run_id
                USING ERRCODE = 'check_violation';
        END IF;
    ELSE
        IF NEW.run_id <> OLD.run_id OR NEW.version <> OLD.version + 1 THEN
            RAISE EXCEPTION 'frontier of run % must advance by exactly one version (% -> %)',
                NEW.run_id, OLD.version, NEW.version USING ERRCODE = 'check_violation';
        END IF;
        IF NOT ((OLD.phase, NEW.phase) IN (
                ('model_ready', 'model_pending'),
                ('model_pending', 'model_pending'),
                ('model_pending', 'tools_pending'),
                ('model_pending', 'reply_ready'),
                ('tools_pending', 'model_ready'))) THEN
            RAISE EXCEPTION 'frontier of run % cannot move from % to %',
                NEW.run_id, OLD.phase, NEW.phase USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END $$;

CREATE TRIGGER frontiers_guard BEFORE INSERT OR UPDATE ON frontiers
    FOR EACH ROW EXECUTE FUNCTION frontier_guard();

CREATE FUNCTION frontier_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO checkpoints (run_id, version, phase, payload)
    VALUES (NEW.run_id, NEW.version, NEW.phase, NEW.checkpoint);
    RETURN NULL;
END $$;

CREATE TRIGGER frontiers_history AFTER INSERT OR UPDATE ON frontiers
    FOR EACH ROW EXECUTE FUNCTION frontier_history();

CREATE TABLE model_calls (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id      uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    turn        integer NOT NULL CHECK (turn >= 0),
    attempt     integer NOT NULL CHECK (attempt >= 1),
    lease_epoch bigint NOT NULL,
    state       text NOT NULL DEFAULT 'pending' CHECK (state IN (
                    'pending', 'recorded', 'interrupted', 'failed')),
    response    jsonb,
    usage       jsonb,
    error       text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    UNIQUE (run_id, turn, attempt),
    -- A recorded call has its response and usage; nothing else has a response.
    CONSTRAINT model_calls_recorded CHECK ((state = 'recorded') = (response IS NOT NULL)),
    CONSTRAINT model_calls_usage CHECK (state = 'recorded' OR usage IS NULL),
    CONSTRAINT model_calls_open CHECK ((state = 'pending') = (finished_at IS NULL))
);

-- At most one open model call per run.
CREATE UNIQUE INDEX model_calls_one_pending ON model_calls (run_id) WHERE state = 'pending';

CREATE TABLE tool_calls (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),  -- the COMMAND_ID
    run_id          uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    turn            integer NOT NULL CHECK (turn >= 0),
    position        integer NOT NULL CHECK (position >= 0),
    tool_call_id    text NOT NULL,
    name            text NOT NULL,
    arguments       text NOT NULL,
    idempotency_key text NOT NULL UNIQUE,
    declaration     jsonb,
    state           text NOT NULL DEFAULT 'reserved' CHECK (state IN (
                        'reserved', 'awaiting_approval', 'started', 'succeeded', 'failed',
                        'outcome_unknown', 'rejected', 'cancelled')),
    approval        text CHECK (approval IN ('approved', 'rejected')),
    outcome         jsonb,
    started_epoch   bigint,
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    settled_at      timestamptz,
    UNIQUE (run_id, tool_call_id),
    UNIQUE (run_id, turn, position),
    CONSTRAINT tool_calls_settled CHECK (
        (state IN ('succeeded', 'failed', 'outcome_unknown', 'rejected', 'cancelled'))
        = (settled_at IS NOT NULL)),
    CONSTRAINT tool_calls_outcome CHECK (
        state NOT IN ('succeeded', 'failed', 'outcome_unknown', 'rejected')
        OR outcome IS NOT NULL),
    CONSTRAINT tool_calls_started_epoch CHECK (state <> 'started' OR started_epoch IS NOT NULL),
    CONSTRAINT tool_calls_approval CHECK (
        state NOT IN ('awaiting_approval', 'rejected') OR declaration IS NOT NULL)
);

-- Append-only: a consumption is billed once per (kind, ref) and never taken back.
CREATE TABLE budget_ledger (
    id         bigserial PRIMARY KEY,
    run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('iterations', 'tool_calls', 'tokens')),
    amount     bigint NOT NULL CHECK (amount > 0),
    ref        text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, kind, ref)
);

CREATE TABLE deliveries (
    run_id       uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    key          text NOT NULL UNIQUE,
    content      text NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN (
                     'pending', 'sending', 'delivered', 'uncertain')),
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    CONSTRAINT deliveries_sent_once_started CHECK (state = 'pending' OR attempts >= 1),
    CONSTRAINT deliveries_delivered CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);

CREATE TABLE events (
    id          bigserial PRIMARY KEY,
    run_id      uuid REFERENCES runs (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN (
                    'run.created', 'run.claimed', 'run.lease_extended', 'run.released',
                    'checkpoint.saved',
                    'model.call_started', 'model.call_recorded', 'model.call_interrupted',
                    'model.call_failed',
                    'tool.command_reserved', 'tool.started', 'tool.succeeded', 'tool.failed',
                    'tool.outcome_unknown', 'tool.awaiting_approval', 'tool.approved',
                    'tool.rejected',
                    'reply.sending', 'reply.delivered', 'reply.uncertain',
                    'run.reconciled', 'run.cancel_requested', 'run.cancelled',
                    'run.succeeded', 'run.failed', 'run.dead_lettered',
                    'run.budget_exhausted', 'run.delivery_uncertain')),
    worker_id   text,
    lease_epoch bigint,
    data        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX events_run ON events (run_id, id);
CREATE INDEX model_calls_run ON model_calls (run_id, turn, attempt);
CREATE INDEX tool_calls_run ON tool_calls (run_id, turn, position);
CREATE INDEX budget_ledger_run ON budget_ledger (run_id, kind);

CREATE FUNCTION forbid_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'check_violation';
END $$;

CREATE TRIGGER budget_ledger_append_only BEFORE UPDATE ON budget_ledger
    FOR EACH ROW EXECUTE FUNCTION forbid_update();
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION forbid_update();
CREATE TRIGGER checkpoints_append_only BEFORE UPDATE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION forbid_update();
