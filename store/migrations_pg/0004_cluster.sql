-- 0004: scale-out (issue 17). Each daemon is its boot_epochs row (epoch is
-- the daemon's id) holding a lease on the database's clock; each session is
-- owned by at most one daemon, under an owner_epoch that increases at every
-- change of owner (the fencing token). docs/protocol.md, "Cluster".

-- label: cluster.label of the daemon (sessions created there are pinned to
-- it when it is not empty). lease_expires_ms: the database's clock in ms
-- since 1970-01-01 UTC until which the daemon is alive, written by each
-- heartbeat as the database's now + cluster.lease_ttl; NULL once stopped.
ALTER TABLE boot_epochs ADD COLUMN label TEXT NOT NULL DEFAULT '';
ALTER TABLE boot_epochs ADD COLUMN lease_expires_ms BIGINT;

-- owner_daemon: boot_epochs.epoch of the owner, NULL when unowned.
-- owner_epoch: +1 at every change of owner_daemon (take, release).
-- pin_label: NULL, or only daemons with this cluster.label may own it.
-- interrupt_generation: a durable session.interrupt request for the turn of
-- that execution generation (the owner may be another daemon).
ALTER TABLE sessions ADD COLUMN owner_daemon BIGINT;
ALTER TABLE sessions ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0 CHECK (owner_epoch >= 0);
ALTER TABLE sessions ADD COLUMN pin_label TEXT;
ALTER TABLE sessions ADD COLUMN interrupt_generation BIGINT;
CREATE INDEX sessions_by_owner ON sessions (owner_daemon);
