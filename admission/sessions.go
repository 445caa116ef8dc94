package admission

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/store"
)

// The reads and writes of the daemon that concern a session's FIFO, its
// ownership or its prompts as a whole (issue 23: the daemon holds no SQL).

// Summary is one session.list row: the session and the state of its FIFO
// and prompts.
type Summary struct {
	SessionID    string  `db:"session_id"`
	Title        string  `db:"title"`
	Cwd          string  `db:"cwd"`
	CreatedAt    string  `db:"created_at"`
	Running      *string `db:"running"` // the started admission, if any
	PendingCount int64   `db:"pending_count"`
	UnknownCount int64   `db:"unknown_count"`
	OpenPrompts  int64   `db:"open_prompts"`
}

// summarySelect reads Summaries from sessions s; callers append a WHERE
// (and ORDER BY, LIMIT). Every subquery is an index seek: the partial
// indexes need their WHERE terms repeated (status <> 'terminal', status =
// 'open').
const summarySelect = `SELECT s.session_id, s.title, s.cwd, s.created_at,
	(SELECT admission_id FROM session_admissions a WHERE a.status <> 'terminal' AND a.target_session_id = s.session_id AND a.status = 'started' AND a.steered_into IS NULL) AS running,
	(SELECT count(*) FROM session_admissions a WHERE a.status <> 'terminal' AND a.target_session_id = s.session_id) AS pending_count,
	(SELECT count(*) FROM session_admissions a WHERE a.status <> 'terminal' AND a.target_session_id = s.session_id AND a.status = 'unknown') AS unknown_count,
	(SELECT count(*) FROM prompts p WHERE p.session_id = s.session_id AND p.status = 'open') AS open_prompts
	FROM sessions s `

// SummaryOf returns the Summary of sessionID; sql.ErrNoRows when there is
// no such session.
func SummaryOf(q store.Queryer, sessionID string) (Summary, error) {
	var r Summary
	err := q.Get(&r, summarySelect+`WHERE s.session_id = ?`, sessionID)
	return r, err
}

// ListFilter selects the sessions of List: newest first, those created
// before (BeforeAt, BeforeID) when BeforeID is set (a cursor), only
// SessionID when set (a session-scoped client), at most Limit.
type ListFilter struct {
	BeforeAt, BeforeID string
	SessionID          string
	Limit              int
}

// List returns the Summaries f selects, by created_at and session_id
// descending.
func List(q store.Queryer, f ListFilter) ([]Summary, error) {
	conds, args := []string{}, []any{}
	if f.BeforeID != "" {
		conds, args = append(conds, "(s.created_at, s.session_id) < (?, ?)"), append(args, f.BeforeAt, f.BeforeID)
	}
	if f.SessionID != "" {
		conds, args = append(conds, "s.session_id = ?"), append(args, f.SessionID)
	}
	where := ""
	if len(conds) > 0 {
		where = "WHERE " + strings.Join(conds, " AND ")
	}
	var rows []Summary
	err := q.Select(&rows, summarySelect+where+` ORDER BY s.created_at DESC, s.session_id DESC LIMIT ?`, append(args, f.Limit)...)
	return rows, err
}

// Counts are the store's figures of daemon.info and of the metrics.
type Counts struct {
	Sessions int64 `db:"sessions"` // every session
	Queued   int64 `db:"queued"`   // queued admissions, every session's
	Held     int64 `db:"held"`     // sessions held by an unknown admission
	Prompts  int64 `db:"prompts"`  // open prompts
}

// CountAll reads Counts in one statement.
func CountAll(ctx context.Context, db *store.DB) (Counts, error) {
	var c Counts
	// The partial indexes need their WHERE terms repeated.
	err := db.Get(ctx, &c, `SELECT (SELECT count(*) FROM sessions) AS sessions,
		(SELECT count(*) FROM session_admissions WHERE status <> 'terminal' AND status = 'queued') AS queued,
		(SELECT count(DISTINCT target_session_id) FROM session_admissions WHERE status <> 'terminal' AND status = 'unknown') AS held,
		(SELECT count(*) FROM prompts WHERE status = 'open') AS prompts`)
	return c, err
}

// ClusterCounts are the sessions q's daemon owns and the daemons whose
// lease is alive on the database's clock (itself included).
func (q *Queue) ClusterCounts(ctx context.Context) (owned, live int64, err error) {
	var cl struct {
		Owned int64 `db:"owned"`
		Live  int64 `db:"live"`
	}
	err = q.DB.Get(ctx, &cl, `SELECT (SELECT count(*) FROM sessions WHERE owner_daemon = ?) AS owned,
		(SELECT count(*) FROM boot_epochs WHERE lease_expires_ms > `+q.dialect().NowMS()+`) AS live`, q.Daemon)
	return cl.Owned, cl.Live, err
}

// NextOwnerExpiry is how long until the first lease of another daemon that
// owns sessions runs out, on the database's clock; ok=false when no such
// lease is alive.
func (q *Queue) NextOwnerExpiry(ctx context.Context) (left time.Duration, ok bool, err error) {
	var ms sql.NullInt64
	now := q.dialect().NowMS()
	err = q.DB.Get(ctx, &ms, `SELECT MIN(lease_expires_ms) - `+now+` FROM boot_epochs
		WHERE epoch <> ? AND lease_expires_ms IS NOT NULL AND lease_expires_ms > `+now+`
		AND epoch IN (SELECT owner_daemon FROM sessions WHERE owner_daemon IS NOT NULL)`, q.Daemon)
	if err != nil || !ms.Valid {
		return 0, false, err
	}
	return time.Duration(ms.Int64) * time.Millisecond, true, nil
}

// OwnedQueued returns the sessions q's daemon owns that have queued input.
func (q *Queue) OwnedQueued(ctx context.Context) ([]string, error) {
	var ids []string
	err := q.DB.Select(ctx, &ids, `SELECT DISTINCT a.target_session_id FROM session_admissions a
		JOIN sessions s ON s.session_id = a.target_session_id
		WHERE a.status <> 'terminal' AND a.status = 'queued' AND s.owner_daemon = ?`, q.Daemon)
	return ids, err
}

// Owner is a session's ownership as the store has it.
type Owner struct {
	Daemon     sql.Null[cluster.DaemonID] `db:"owner_daemon"` // NULL: unowned
	LeaseEpoch cluster.LeaseEpoch         `db:"lease_epoch"`
	// Interrupt is a durable session.interrupt request for the turn of
	// that execution generation.
	Interrupt sql.NullInt64 `db:"interrupt_generation"`
}

// OwnerOf reads the ownership of sessionID; ErrSessionNotFound when it does
// not exist (deleted).
func (q *Queue) OwnerOf(ctx context.Context, sessionID string) (Owner, error) {
	var o Owner
	err := q.DB.Get(ctx, &o, `SELECT owner_daemon, lease_epoch, interrupt_generation FROM sessions WHERE session_id = ?`, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrSessionNotFound
	}
	return o, err
}

// StartedIn returns the started admission of sessionID (its turn, not the
// steers taken into it); ok=false when none is started.
func StartedIn(ctx context.Context, db *store.DB, sessionID string) (a Admission, ok bool, err error) {
	err = db.Get(ctx, &a, `SELECT `+columns+` FROM session_admissions
		WHERE status <> 'terminal' AND target_session_id = ? AND status = 'started' AND steered_into IS NULL`, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, nil
	}
	return a, err == nil, err
}

// RequestInterrupt records a durable session.interrupt request for the
// turn of generation gen in sessionID (sessions.interrupt_generation, read
// by the owner and by every answer's fence) and wakes the owner through
// the bus (ChannelSessions).
func (q *Queue) RequestInterrupt(ctx context.Context, sessionID string, gen int64) error {
	return q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("interrupt")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE sessions SET interrupt_generation = ? WHERE session_id = ?`, gen, sessionID); err != nil {
			return err
		}
		if q.Bus != nil {
			q.Bus.Notify(tx, cluster.ChannelSessions, sessionID)
		}
		return nil
	})
}

// ToolEvent is a tool.running or tool.completed event of an unknown
// admission (LeftoverToolEvents).
type ToolEvent struct {
	SessionID   string `db:"session_id"`
	AdmissionID string `db:"admission_id"`
	Type        string `db:"type"`
	Payload     string `db:"payload"`
}

// LeftoverToolEvents returns the tool.running and tool.completed events of
// every unknown admission: the commands that may still run, orphaned, after
// their daemon died. Unknown admissions first (the partial index on open
// rows), then their session's events by primary key prefix: no scan of the
// events table. (The payloads are for the caller to match, not a JSON
// function of one SQL dialect.)
func LeftoverToolEvents(ctx context.Context, db *store.DB) ([]ToolEvent, error) {
	var rows []ToolEvent
	err := db.Select(ctx, &rows, `SELECT e.session_id, e.admission_id, e.type, e.payload
		FROM session_admissions a CROSS JOIN events e
		WHERE a.status <> 'terminal' AND a.status = 'unknown'
		AND e.session_id = a.target_session_id AND e.admission_id = a.admission_id
		AND e.type IN ('tool.running', 'tool.completed')`)
	return rows, err
}
