package prompts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// Prompt kinds.
const (
	KindApproval = "approval"
	KindClarify  = "clarify"
)

// Resolutions of prompt.closed (PROTOCOL.md section 6).
const (
	ResolutionAnswered    = "answered"    // a client answered
	ResolutionTimedOut    = "timed_out"   // approvals.timeout / agent.clarify_timeout passed
	ResolutionInterrupted = "interrupted" // session.interrupt or graceful stop ended the turn
	ResolutionFenced      = "fenced"      // its execution is gone (restart, resolve_unknown)
)

// Results of Respond.
const (
	StatusResolved        = "resolved"
	StatusAlreadyResolved = "already_resolved"
)

// Approval choices (PROTOCOL.md section 7).
const (
	ChoiceOnce    = "once"
	ChoiceSession = "session"
	ChoiceAlways  = "always"
	ChoiceDeny    = "deny"
)

// ValidChoice reports whether c is once, session, always or deny.
func ValidChoice(c string) bool {
	switch c {
	case ChoiceOnce, ChoiceSession, ChoiceAlways, ChoiceDeny:
		return true
	}
	return false
}

// Errors; the daemon maps each to a wire reason.
var (
	ErrNotFound        = errors.New("prompt not found")                           // not_found
	ErrStaleGeneration = errors.New("the prompt's execution is not the live one") // stale_generation
	ErrInvalidAnswer   = errors.New("invalid answer")                             // invalid_params
	ErrNotLive         = errors.New("the turn is no longer live")                 // Ask: the execution ended
)

// ErrNoLiveCheck is what Respond returns for a prompt of this daemon when
// the manager was built without its live check (NewManager with a nil
// Liveness): nothing can say that the prompt's execution still runs, so the
// fence fails closed. errors.Is(err, ErrStaleGeneration) holds: on the wire
// it is stale_generation.
var ErrNoLiveCheck = fmt.Errorf("%w: the prompts manager has no live check", ErrStaleGeneration)

// Prompt is one prompts row.
type Prompt struct {
	PromptID            string `db:"prompt_id"`
	SessionID           string `db:"session_id"`
	AdmissionID         string `db:"admission_id"`
	ExecutionGeneration int64  `db:"execution_generation"`
	// Daemon is the daemon that opened it (column owner_epoch, its boot
	// epoch).
	Daemon     cluster.DaemonID `db:"owner_epoch"`
	Kind       string           `db:"kind"`
	Payload    string           `db:"payload"`
	Status     string           `db:"status"`
	Resolution sql.NullString   `db:"resolution"`
	Response   sql.NullString   `db:"response"`
	CreatedAt  string           `db:"created_at"`
	ExpiresAt  sql.NullString   `db:"expires_at"`
	ClosedAt   sql.NullString   `db:"closed_at"`
}

const columns = `prompt_id, session_id, admission_id, execution_generation, owner_epoch, kind, payload, status,
	resolution, response, created_at, expires_at, closed_at`

// Wire is the prompt's shape in prompt.opened events and snapshots.
func (p Prompt) Wire() protocol.Prompt {
	return protocol.Prompt{PromptID: p.PromptID, SessionID: p.SessionID, Kind: protocol.PromptKind(p.Kind),
		ExecutionGeneration: p.ExecutionGeneration, AdmissionID: p.AdmissionID,
		Payload: json.RawMessage(p.Payload), CreatedAt: p.CreatedAt, ExpiresAt: p.ExpiresAt.String}
}

// OpenForSession returns the open prompts of sessionID opened by daemon
// (any daemon when daemon <= 0), in creation order.
func OpenForSession(q store.Queryer, sessionID string, daemon cluster.DaemonID) ([]Prompt, error) {
	var ps []Prompt
	err := q.Select(&ps, `SELECT `+columns+` FROM prompts WHERE session_id = ? AND status = 'open' AND (? <= 0 OR owner_epoch = ?)
		ORDER BY created_at, prompt_id`, sessionID, daemon, daemon)
	return ps, store.Classify(err)
}

// Outcome is how an Ask ended. Response is the stored answer JSON:
// {"choice": …} for approvals, {"answer": …} for clarify; empty unless
// Resolution is answered.
type Outcome struct {
	PromptID   string
	Resolution string
	Response   json.RawMessage
}

// Liveness answers whether an execution runs in this daemon right now and
// has not been asked to stop (admission.Scheduler).
type Liveness interface {
	IsLive(e admission.Execution) bool
}

// Manager opens, answers and closes prompts. Safe for concurrent use.
type Manager struct {
	db     *store.DB
	daemon cluster.DaemonID
	log    *slog.Logger
	live   Liveness

	bus *cluster.Bus

	mu      sync.Mutex
	waiters map[string]waiter
}

// waiter is an Ask waiting for its prompt's outcome.
type waiter struct {
	sessionID string
	ch        chan Outcome
}

// SetCluster makes the manager part of a cluster of daemons sharing the
// store: an answer given here to a prompt of a turn that runs on another
// daemon is judged from the store (its owner's lease on the database's
// clock included) and wakes that daemon through bus (ChannelSessions),
// which then calls Poll. Set it before serving.
func (m *Manager) SetCluster(bus *cluster.Bus) { m.bus = bus }

// Poll delivers to the Asks waiting in sessionID the outcome of their
// prompts closed in the store meanwhile (answered on another daemon, or
// closed by a takeover). Safe to call at any time; store errors are
// returned and nothing is delivered for them.
func (m *Manager) Poll(ctx context.Context, sessionID string) error {
	m.mu.Lock()
	var ids []string
	for id, w := range m.waiters {
		if sessionID == "" || w.sessionID == sessionID {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		var p Prompt
		err := m.db.Get(ctx, &p, `SELECT `+columns+` FROM prompts WHERE prompt_id = ?`, id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return err
		}
		if p.Status != "closed" {
			continue
		}
		o := Outcome{PromptID: p.PromptID, Resolution: p.Resolution.String}
		if p.Response.Valid {
			o.Response = json.RawMessage(p.Response.String)
		}
		m.deliver(o)
	}
	return nil
}

// NewManager returns a Manager for this daemon. live is the
// in-memory half of the fence (the daemon's admission.Scheduler): an answer
// to a prompt this daemon opened is accepted only while live says its
// execution runs. A nil live fails closed: every such answer is refused
// with ErrNoLiveCheck.
func NewManager(db *store.DB, daemon cluster.DaemonID, live Liveness, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{db: db, daemon: daemon, live: live, log: log, waiters: map[string]waiter{}}
}

// Execution is the execution the prompt belongs to; its LeaseEpoch (the
// session's token) is not known from the prompt (0).
func (p Prompt) Execution() admission.Execution {
	return admission.Execution{SessionID: p.SessionID, AdmissionID: p.AdmissionID, Generation: p.ExecutionGeneration, Daemon: p.Daemon}
}

// liveErr is the in-memory half of the fence: a prompt opened by this
// daemon is live only while its scheduler runs the execution and has not
// asked it to stop (nil), else ErrStaleGeneration; without a live check,
// ErrNoLiveCheck. A prompt of another daemon is judged from the store alone
// (admission.Execution.CheckAnswerable), so it passes here.
func (m *Manager) liveErr(p Prompt) error {
	switch {
	case p.Daemon != m.daemon:
		return nil
	case m.live == nil:
		return fmt.Errorf("%w: prompt %s", ErrNoLiveCheck, p.PromptID)
	case !m.live.IsLive(p.Execution()):
		return fmt.Errorf("%w: execution %d of prompt %s has ended", ErrStaleGeneration, p.ExecutionGeneration, p.PromptID)
	}
	return nil
}

// deliver hands o to the waiter of o.PromptID, if one waits. Called after
// commit only.
func (m *Manager) deliver(o Outcome) {
	m.mu.Lock()
	w, ok := m.waiters[o.PromptID]
	delete(m.waiters, o.PromptID)
	m.mu.Unlock()
	if ok {
		w.ch <- o // buffered 1; each waiter gets one delivery
	}
}

// closeEvent appends prompt.closed for p and delivers the outcome after
// commit.
func (m *Manager) closeEvent(tx *store.Tx, p Prompt, resolution string, response json.RawMessage) error {
	return m.closeEventBy(tx, p, resolution, response, nil)
}

// closeEventBy is closeEvent with who answered (nil: nobody, or unknown).
func (m *Manager) closeEventBy(tx *store.Tx, p Prompt, resolution string, response json.RawMessage, by *protocol.AnsweredBy) error {
	payload := protocol.PromptClosedPayload{PromptID: p.PromptID, Resolution: protocol.Resolution(resolution), Response: response, AnsweredBy: by}
	if _, err := tx.AppendEvent(p.SessionID, protocol.EventPromptClosed, p.AdmissionID, p.ExecutionGeneration, payload); err != nil {
		return err
	}
	o := Outcome{PromptID: p.PromptID, Resolution: resolution, Response: response}
	tx.OnCommit(func() { m.deliver(o) })
	return nil
}

// LeaseEpoch is the session's lease epoch an execution runs under
// (cluster.LeaseEpoch), named here for the agent, which knows prompts and
// not the cluster.
type LeaseEpoch = cluster.LeaseEpoch

// Ask is one prompt a turn opens and waits on.
type Ask struct {
	SessionID   string
	AdmissionID string
	Generation  int64
	LeaseEpoch  cluster.LeaseEpoch // the session's lease epoch of the execution (admission.Execution)
	Kind        string             // KindApproval or KindClarify
	Payload     any                // JSON object shown to the user
	Timeout     time.Duration      // after this the prompt closes timed_out
}

// Ask opens a prompt for the live execution (prompt.opened event, in one
// transaction fenced on the admission being started with that generation)
// and waits until it is answered, times out, or ctx ends. On ctx end it
// returns at once with ctx's error; the settle of the turn then closes the
// prompt (interrupted). Errors: ErrNotLive when the execution already ended,
// store.ErrUnavailable.
func (m *Manager) Ask(ctx context.Context, a Ask) (Outcome, error) {
	payload, err := json.Marshal(a.Payload)
	if err != nil {
		return Outcome{}, err
	}
	now := time.Now()
	p := Prompt{PromptID: "prm_" + uuid.Must(uuid.NewV7()).String(), SessionID: a.SessionID, AdmissionID: a.AdmissionID,
		ExecutionGeneration: a.Generation, Daemon: m.daemon, Kind: a.Kind, Payload: string(payload), Status: "open",
		CreatedAt: store.FormatTime(now)}
	if a.Timeout > 0 {
		p.ExpiresAt = sql.NullString{String: store.FormatTime(now.Add(a.Timeout)), Valid: true}
	}
	ch := make(chan Outcome, 1)
	m.mu.Lock()
	m.waiters[p.PromptID] = waiter{sessionID: p.SessionID, ch: ch}
	m.mu.Unlock()
	forget := func() {
		m.mu.Lock()
		delete(m.waiters, p.PromptID)
		m.mu.Unlock()
	}
	err = m.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("prompt.open")
		if err := tx.LockSessions(a.SessionID); err != nil {
			return err
		}
		x := admission.Execution{SessionID: a.SessionID, AdmissionID: a.AdmissionID, Generation: a.Generation, Daemon: m.daemon, LeaseEpoch: a.LeaseEpoch}
		if err := x.Check(tx); err != nil {
			if errors.Is(err, admission.ErrFenced) {
				return fmt.Errorf("%w: %w", ErrNotLive, err)
			}
			return err
		}
		if _, err := tx.Exec(`INSERT INTO prompts (`+columns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'open', NULL, NULL, ?, ?, NULL)`,
			p.PromptID, p.SessionID, p.AdmissionID, p.ExecutionGeneration, p.Daemon, p.Kind, p.Payload, p.CreatedAt, p.ExpiresAt); err != nil {
			return err
		}
		_, err = tx.AppendEvent(p.SessionID, protocol.EventPromptOpened, p.AdmissionID, p.ExecutionGeneration, protocol.PromptOpenedPayload{Prompt: p.Wire()})
		return err
	})
	if err != nil {
		forget()
		return Outcome{PromptID: p.PromptID}, err
	}
	var timeout <-chan time.Time
	if a.Timeout > 0 {
		t := time.NewTimer(a.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case o := <-ch:
		return o, nil
	case <-ctx.Done():
		forget()
		return Outcome{PromptID: p.PromptID, Resolution: ResolutionInterrupted}, ctx.Err()
	case <-timeout:
		closed := false
		err := m.db.InTx(context.Background(), func(tx *store.Tx) error {
			tx.Label("prompt.timeout")
			// The session row first, as every transaction that also writes
			// the prompt row (prompt.answer, settle's hook): no deadlock.
			if err := tx.LockSessions(p.SessionID); err != nil {
				return err
			}
			var got Prompt
			err := tx.Get(&got, `UPDATE prompts SET status = 'closed', resolution = 'timed_out', closed_at = ?
				WHERE prompt_id = ? AND status = 'open' RETURNING `+columns, store.Now(), p.PromptID)
			if errors.Is(err, sql.ErrNoRows) {
				return nil // an answer or a close won the race; it was delivered
			} else if err != nil {
				return err
			}
			closed = true
			return m.closeEvent(tx, got, ResolutionTimedOut, nil)
		})
		if err != nil {
			forget()
			// Fail closed: an approval that could not be recorded is a deny.
			return Outcome{PromptID: p.PromptID, Resolution: ResolutionTimedOut}, err
		}
		_ = closed
		select {
		case o := <-ch:
			return o, nil
		case <-ctx.Done():
			forget()
			return Outcome{PromptID: p.PromptID, Resolution: ResolutionInterrupted}, ctx.Err()
		}
	}
}

// Response is one approval.respond or clarify.respond.
type Response struct {
	SessionID  string
	PromptID   string
	Kind       string
	Generation int64
	Answer     json.RawMessage // {"choice": …} or {"answer": …}
	// AnsweredBy, when not nil, says who answered; it goes into the
	// prompt.closed event as answered_by (e.g. {"conn": "12", "client":
	// "sessionctl/1.0"}), for the transcript and the audit.
	AnsweredBy *protocol.AnsweredBy
}

// Respond answers a prompt of the live execution. It returns
// StatusResolved for the first answer and StatusAlreadyResolved for later
// ones while the execution is live. Errors: ErrNotFound (no such prompt in
// that session, or another kind), ErrStaleGeneration (the generation given
// is not the prompt's, or its execution is no longer live: interrupted,
// restarted, resolved), store.ErrUnavailable. A "session" or "always"
// approval records its pattern in the same transaction.
func (m *Manager) Respond(ctx context.Context, r Response) (string, error) {
	var p Prompt
	err := m.db.Get(ctx, &p, `SELECT `+columns+` FROM prompts WHERE prompt_id = ? AND session_id = ?`, r.PromptID, r.SessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: %s in session %s", ErrNotFound, r.PromptID, r.SessionID)
	} else if err != nil {
		return "", err
	}
	if p.Kind != r.Kind {
		return "", fmt.Errorf("%w: %s is a %s prompt; answer it with %s.respond", ErrNotFound, p.PromptID, p.Kind, p.Kind)
	}
	if r.Generation != p.ExecutionGeneration {
		return "", fmt.Errorf("%w: prompt %s belongs to execution %d, not %d", ErrStaleGeneration, p.PromptID, p.ExecutionGeneration, r.Generation)
	}
	if err := m.liveErr(p); err != nil {
		return "", err
	}
	if p.Status == "closed" {
		return m.closedStatus(p)
	}
	status := StatusResolved
	err = m.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("prompt.answer")
		if err := tx.LockSessions(p.SessionID); err != nil {
			return err
		}
		x := p.Execution()
		fence := x.Check(tx)
		if p.Daemon != m.daemon {
			// Answered on a daemon that does not run the turn: the store
			// alone decides, the owner's lease included.
			fence = x.CheckAnswerable(tx, cluster.DialectOf(m.db))
		}
		if err := fence; err != nil {
			if errors.Is(err, admission.ErrFenced) {
				return fmt.Errorf("%w: execution %d of prompt %s has ended: %w", ErrStaleGeneration, p.ExecutionGeneration, p.PromptID, err)
			}
			return err
		}
		var got Prompt
		err := tx.Get(&got, `UPDATE prompts SET status = 'closed', resolution = 'answered', response = ?, closed_at = ?
			WHERE prompt_id = ? AND status = 'open'
			RETURNING `+columns, string(r.Answer), store.Now(), p.PromptID)
		if errors.Is(err, sql.ErrNoRows) {
			cur, err := getPrompt(tx, p.PromptID)
			if err != nil {
				return err
			}
			status, err = m.closedStatus(cur)
			return err
		} else if err != nil {
			return err
		}
		if p.Kind == KindApproval {
			if err := recordAllowance(tx, got, r.Answer); err != nil {
				return err
			}
		}
		if m.bus != nil && got.Daemon != m.daemon {
			m.bus.Notify(tx, cluster.ChannelSessions, got.SessionID)
		}
		return m.closeEventBy(tx, got, ResolutionAnswered, r.Answer, r.AnsweredBy)
	})
	if err != nil {
		return "", err
	}
	return status, nil
}

// closedStatus explains a closed prompt of a live execution: answered or
// timed out means the first resolution won; anything else means the
// execution moved on.
func (m *Manager) closedStatus(p Prompt) (string, error) {
	if p.Status == "closed" && (p.Resolution.String == ResolutionAnswered || p.Resolution.String == ResolutionTimedOut) && m.liveErr(p) == nil {
		return StatusAlreadyResolved, nil
	}
	return "", fmt.Errorf("%w: prompt %s was closed (%s)", ErrStaleGeneration, p.PromptID, p.Resolution.String)
}

func getPrompt(q store.Queryer, id string) (Prompt, error) {
	var p Prompt
	err := q.Get(&p, `SELECT `+columns+` FROM prompts WHERE prompt_id = ?`, id)
	return p, err
}

// CloseForAdmission closes every open prompt of the admission with
// resolution in tx (the settle or resolve transaction) and wakes their
// waiters after commit.
func (m *Manager) CloseForAdmission(tx *store.Tx, sessionID, admissionID, resolution string) error {
	var ps []Prompt
	if err := tx.Select(&ps, `UPDATE prompts SET status = 'closed', resolution = ?, closed_at = ?
		WHERE session_id = ? AND admission_id = ? AND status = 'open' RETURNING `+columns,
		resolution, store.Now(), sessionID, admissionID); err != nil {
		return err
	}
	for _, p := range ps {
		if err := m.closeEvent(tx, p, resolution, nil); err != nil {
			return err
		}
	}
	return nil
}

// FenceEarlierEpochs closes as fenced, each with a prompt.closed event,
// every prompt left open by another daemon, in every session. It is only
// right when no other daemon runs on the store; the daemon's boot and
// takeovers close per session instead (FenceSession, for the sessions they
// take).
func (m *Manager) FenceEarlierEpochs(tx *store.Tx) error {
	var ps []Prompt
	if err := tx.Select(&ps, `UPDATE prompts SET status = 'closed', resolution = 'fenced', closed_at = ?
		WHERE status = 'open' AND owner_epoch <> ? RETURNING `+columns, store.Now(), m.daemon); err != nil {
		return err
	}
	for _, p := range ps {
		if err := m.closeEvent(tx, p, ResolutionFenced, nil); err != nil {
			return err
		}
	}
	return nil
}

// FenceSession is the takeover hook (admission.Queue.OnTake): the open
// prompts of sessionID opened by other daemons close as fenced, each with a
// prompt.closed event, so that their ids answer stale_generation.
func (m *Manager) FenceSession(tx *store.Tx, sessionID string) error {
	var ps []Prompt
	if err := tx.Select(&ps, `UPDATE prompts SET status = 'closed', resolution = 'fenced', closed_at = ?
		WHERE session_id = ? AND status = 'open' AND owner_epoch <> ? RETURNING `+columns, store.Now(), sessionID, m.daemon); err != nil {
		return err
	}
	for _, p := range ps {
		if err := m.closeEvent(tx, p, ResolutionFenced, nil); err != nil {
			return err
		}
	}
	if len(ps) > 0 && m.bus != nil {
		// The daemon that opened them, if it still runs, wakes its waiters.
		m.bus.Notify(tx, cluster.ChannelSessions, sessionID)
	}
	return nil
}

// Stop wakes every remaining waiter with interrupted.
func (m *Manager) Stop() {
	m.mu.Lock()
	ws := m.waiters
	m.waiters = map[string]waiter{}
	m.mu.Unlock()
	for id, w := range ws {
		w.ch <- Outcome{PromptID: id, Resolution: ResolutionInterrupted}
	}
}
