-- 0005: one name per meaning (issue 23). owner_epoch meant two things: the
-- boot epoch (daemon id, boot_epochs.epoch) of the daemon that started an
-- admission or opened a prompt, and the session's fencing counter. The
-- daemon ids keep the name (session_admissions.owner_epoch is fixed by
-- PROTOCOL.md section 9; prompts.owner_epoch is the same thing); the
-- counter becomes sessions.lease_epoch: +1 at every change of owner_daemon
-- (take, release), the term of the session's lease. RENAME COLUMN keeps
-- the value, the default and the CHECK (lease_epoch >= 0).
ALTER TABLE sessions RENAME COLUMN owner_epoch TO lease_epoch;
