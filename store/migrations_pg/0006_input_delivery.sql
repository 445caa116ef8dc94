-- 0006: input delivery while a turn runs, and editing the queue (issue 25,
-- PROTOCOL.md sections 10.2 and 10.3).
--
-- queue_order: the FIFO's order. The scheduler claims the queued admission
-- with the lowest queue_order (then seq); prompt.move and the admission of
-- a steer or an interrupt re-sequence the session's queued rows among the
-- values they already hold, so every value stays below the seq of the next
-- admission (which starts at queue_order = seq, the end of the queue) and
-- the order survives restarts and takeovers. seq keeps its meaning (the
-- order of admission, UNIQUE per session).
-- delivery: how the input was asked to meet a running turn (prompt.submit
-- when_busy): 'queue', 'steer' (handed to the running turn at its next
-- model request) or 'interrupt' (the running turn was interrupted for it).
-- steered_into: the admission of the turn a steer was taken into; the steer
-- then shares that turn's status, execution_generation and owner_epoch and
-- settles (or is resolved) with it.
-- edited_digest: the payload digest of the text and attachments after the
-- last prompt.update (payload_digest keeps the digest of the original
-- submission); a resubmit with either is a duplicate.
ALTER TABLE session_admissions ADD COLUMN queue_order BIGINT NOT NULL DEFAULT 0;
UPDATE session_admissions SET queue_order = seq;
ALTER TABLE session_admissions ADD COLUMN delivery TEXT NOT NULL DEFAULT 'queue'
    CHECK (delivery IN ('queue', 'steer', 'interrupt'));
ALTER TABLE session_admissions ADD COLUMN steered_into TEXT;
ALTER TABLE session_admissions ADD COLUMN edited_digest TEXT;
-- The FIFO head and the snapshot's pending list, by queue order.
CREATE INDEX session_admissions_order ON session_admissions (target_session_id, queue_order, seq)
    WHERE status <> 'terminal';
