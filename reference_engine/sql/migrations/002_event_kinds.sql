-- Every terminal status has its run.<status> event, and cancelled tool calls have
-- their own kind (001 missed run.delivery_uncertain: finishing such a run failed).
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN (
    'run.created', 'run.claimed', 'run.lease_extended', 'run.released',
    'checkpoint.saved',
    'model.call_started', 'model.call_recorded', 'model.call_interrupted',
    'model.call_failed',
    'tool.command_reserved', 'tool.started', 'tool.succeeded', 'tool.failed',
    'tool.outcome_unknown', 'tool.awaiting_approval', 'tool.approved', 'tool.rejected',
    'tool.cancelled',
    'reply.sending', 'reply.delivered', 'reply.uncertain',
    'run.reconciled', 'run.cancel_requested', 'run.cancelled',
    'run.succeeded', 'run.failed', 'run.dead_lettered', 'run.budget_exhausted',
    'run.delivery_uncertain'));
