package admission

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// Ownership (issue 17). Each session is owned by at most one daemon
// (sessions.owner_daemon, a cluster.DaemonID) under sessions.lease_epoch
// (a cluster.LeaseEpoch), a fencing token that increases at every change
// of owner. Only the owner
// claims, settles, opens prompts and writes a turn's transcript; every such
// write runs Execution.Check in its transaction. A session that is unowned,
// or whose owner's lease expired on the database's clock, may be taken by
// any live daemon; taking it applies the boot rules to it: its started
// admissions become unknown (nothing is re-run) and its open prompts close
// as fenced (Queue.OnTake), so their ids answer stale_generation.

// ErrNotOwner means another live daemon owns the session (or it is pinned
// to another cluster.label): only that daemon may claim or run its work.
var ErrNotOwner = errors.New("the session is owned by another live daemon")

// Taken is what taking one session did.
type Taken struct {
	SessionID string
	// From is the previous owner, 0 when it was unowned.
	From cluster.DaemonID
	// LeaseEpoch is the session's new lease_epoch.
	LeaseEpoch cluster.LeaseEpoch
	// Unknown are its started admissions, now unknown (boot rules).
	Unknown []Admission
}

type ownerRow struct {
	Daemon sql.Null[cluster.DaemonID] `db:"owner_daemon"`
	Lease  cluster.LeaseEpoch         `db:"lease_epoch"`
	Pin    sql.NullString             `db:"pin_label"`
	Live   int                        `db:"live"`
}

func (q *Queue) ownerSQL() string {
	return `SELECT owner_daemon, lease_epoch, pin_label,
		CASE WHEN owner_daemon IS NULL THEN 0 WHEN ` + q.dialect().LiveDaemon("sessions.owner_daemon") + ` THEN 1 ELSE 0 END AS live
		FROM sessions WHERE session_id = ?`
}

func (q *Queue) owner(tx store.Queryer, sessionID string) (ownerRow, error) {
	var o ownerRow
	err := tx.Get(&o, q.ownerSQL(), sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
	}
	return o, err
}

func (q *Queue) dialect() cluster.Dialect { return cluster.DialectOf(q.DB) }

// mine says whether q's daemon owns the session described by o.
func (q *Queue) mine(o ownerRow) bool { return o.Daemon.Valid && o.Daemon.V == q.Daemon }

// takeable says whether q's daemon may take the session described by o.
func (q *Queue) takeable(o ownerRow) bool {
	if o.Pin.Valid && o.Pin.String != q.Label {
		return false
	}
	return !o.Daemon.Valid || (o.Daemon.V != q.Daemon && o.Live == 0)
}

// Take makes q's daemon the owner of sessionID when it is unowned or its
// owner's lease expired, applying the boot rules to it in the same
// transaction. Owning it already is no change (ok=false). Errors:
// ErrNotOwner (another live daemon owns it, or it is pinned to another
// label), ErrSessionNotFound, store.ErrUnavailable.
func (q *Queue) Take(ctx context.Context, sessionID string) (t Taken, ok bool, err error) {
	err = q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("take")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		o, err := q.owner(tx, sessionID)
		if err != nil {
			return err
		}
		if q.mine(o) {
			t, ok = Taken{SessionID: sessionID, LeaseEpoch: o.Lease, From: q.Daemon}, false
			return nil
		}
		if !q.takeable(o) {
			return ErrNotOwner
		}
		t, err = q.take(tx, sessionID, o)
		ok = err == nil
		return err
	})
	return t, ok, store.Classify(err)
}

// take moves sessionID (described by o) to q's daemon in tx and applies
// the boot rules to it.
func (q *Queue) take(tx *store.Tx, sessionID string, o ownerRow) (Taken, error) {
	t := Taken{SessionID: sessionID, From: o.Daemon.V}
	// Guarded by the epoch read: a concurrent take by another daemon
	// bumped it, and this one then takes nothing.
	err := tx.Get(&t.LeaseEpoch, `UPDATE sessions SET owner_daemon = ?, lease_epoch = lease_epoch + 1
		WHERE session_id = ? AND lease_epoch = ? RETURNING lease_epoch`, q.Daemon, sessionID, o.Lease)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("%w: session %s changed owner meanwhile", ErrNotOwner, sessionID)
	} else if err != nil {
		return t, err
	}
	if err := tx.Select(&t.Unknown, `UPDATE session_admissions SET status = 'unknown'
		WHERE status <> 'terminal' AND status = 'started' AND target_session_id = ? AND owner_epoch <> ?
		RETURNING `+columns, sessionID, q.Daemon); err != nil {
		return t, err
	}
	for _, a := range t.Unknown {
		if _, err := tx.AppendEvent(a.SessionID, protocol.EventAdmissionUpdated, a.AdmissionID, a.Generation(), a.Receipt()); err != nil {
			return t, err
		}
	}
	if q.OnTake != nil {
		if err := q.OnTake(tx, sessionID); err != nil {
			return t, err
		}
	}
	if q.Bus != nil {
		// The previous owner, if it still runs (a split brain), stops the
		// session's turn at once instead of at its next write.
		q.Bus.Notify(tx, cluster.ChannelSessions, sessionID)
	}
	return t, nil
}

// orphan is one candidate of TakeOrphans.
type orphan struct {
	SessionID string `db:"session_id"`
	ownerRow
	Urgent int `db:"urgent"`
	Held   int `db:"held"`
}

// TakeOrphans takes the sessions that need an owner: those with a started
// admission or an open prompt whose owner is gone (their clients must see
// the boot rules within the lease), all of them, and up to queuedSlots of
// those with only queued work (queuedSlots < 0: all of them), sessions held
// by an unknown admission excepted. Sessions pinned to another label are
// left alone. On PostgreSQL candidates locked by another daemon's takeover
// are skipped. It returns what it took.
func (q *Queue) TakeOrphans(ctx context.Context, queuedSlots int) ([]Taken, error) {
	var out []Taken
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("take_orphans")
		var err error
		out, err = q.takeOrphans(tx, queuedSlots, false)
		return err
	})
	return out, store.Classify(err)
}

// takeOrphans is TakeOrphans in tx; held includes sessions held by an
// unknown admission (the boot takes everything).
func (q *Queue) takeOrphans(tx *store.Tx, queuedSlots int, held bool) ([]Taken, error) {
	var cands []orphan
	// Driven by the partial indexes of open admissions and open prompts,
	// so that idle sessions are never scanned.
	err := tx.Select(&cands, `SELECT s.session_id, s.owner_daemon, s.lease_epoch, s.pin_label, 0 AS live,
		CASE WHEN EXISTS (SELECT 1 FROM session_admissions a WHERE a.status <> 'terminal' AND a.target_session_id = s.session_id AND a.status = 'started')
		       OR EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.session_id AND p.status = 'open') THEN 1 ELSE 0 END AS urgent,
		CASE WHEN EXISTS (SELECT 1 FROM session_admissions a WHERE a.status <> 'terminal' AND a.target_session_id = s.session_id AND a.status = 'unknown') THEN 1 ELSE 0 END AS held
		FROM sessions s
		WHERE s.session_id IN (SELECT a.target_session_id FROM session_admissions a WHERE a.status <> 'terminal' AND a.status IN ('started', 'queued')
		                       UNION SELECT p.session_id FROM prompts p WHERE p.status = 'open')
		  AND (s.owner_daemon IS NULL OR (s.owner_daemon <> ? AND NOT `+q.dialect().LiveDaemon("s.owner_daemon")+`))
		  AND (s.pin_label IS NULL OR s.pin_label = ?)
		ORDER BY s.session_id`+q.dialect().SkipLocked("s"), q.Daemon, q.Label)
	if err != nil {
		return nil, err
	}
	var out []Taken
	for _, c := range cands {
		if c.Urgent == 0 {
			if (c.Held == 1 && !held) || queuedSlots == 0 {
				continue
			}
			if queuedSlots > 0 {
				queuedSlots--
			}
		}
		t, err := q.take(tx, c.SessionID, c.ownerRow)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Release gives up every session q's daemon owns (graceful stop): owner
// NULL, lease_epoch + 1, and a ChannelSessions notification for each
// session with queued work so that another daemon takes it at once. Its
// turns must have settled first; a started admission left behind becomes
// unknown when another daemon takes the session. It returns the sessions
// released.
func (q *Queue) Release(ctx context.Context) ([]string, error) {
	var ids []string
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("release")
		ids = nil
		var rows []struct {
			SessionID string `db:"session_id"`
			Queued    int    `db:"queued"`
		}
		if err := tx.Select(&rows, `UPDATE sessions SET owner_daemon = NULL, lease_epoch = lease_epoch + 1
			WHERE owner_daemon = ?
			RETURNING session_id, CASE WHEN EXISTS (SELECT 1 FROM session_admissions a WHERE a.status <> 'terminal'
				AND a.target_session_id = sessions.session_id AND a.status = 'queued') THEN 1 ELSE 0 END AS queued`, q.Daemon); err != nil {
			return err
		}
		for _, r := range rows {
			ids = append(ids, r.SessionID)
			if r.Queued == 1 && q.Bus != nil {
				q.Bus.Notify(tx, cluster.ChannelSessions, r.SessionID)
			}
		}
		return nil
	})
	return ids, store.Classify(err)
}
