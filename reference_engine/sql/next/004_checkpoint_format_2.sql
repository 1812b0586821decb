-- The next release (engine.yaml `upgrade`; `python -m reference_engine --release next
-- migrate`): recovery points are written in format 2 (checkpoint.py), and runs started by
-- the current release still carry format 1. The format is named twice, in the payload's
-- "v" and in checkpoint_version; a row where the two disagree, or a format neither release
-- reads, is refused here rather than discovered by a worker resuming it.
ALTER TABLE frontiers ADD CONSTRAINT frontiers_format_known CHECK (
    checkpoint_version IN (1, 2) AND checkpoint->>'v' = checkpoint_version::text
);
