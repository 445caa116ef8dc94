package admission

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// Status is where an admission stands in its session's FIFO. The same
// values are enforced by the CHECK constraint of session_admissions.status.
type Status = protocol.AdmissionStatus

// The statuses (protocol.AdmissionStatus).
const (
	// StatusQueued: committed and waiting. Moved on by the Scheduler's
	// claim (→ started) or by Cancel (→ terminal/cancelled).
	StatusQueued = protocol.StatusQueued
	// StatusStarted: its turn runs in the daemon of owner_epoch. Moved on by
	// Settle when the turn ends (→ terminal with any outcome but cancelled),
	// or by Recover at the next boot when its daemon died (→ unknown).
	StatusStarted = protocol.StatusStarted
	// StatusUnknown: it was started when an earlier daemon died, so its
	// effects are uncertain; it holds its session's FIFO. Moved on only by
	// ResolveUnknown, the operator's decision (→ terminal/interrupted).
	StatusUnknown = protocol.StatusUnknown
	// StatusTerminal: settled with an Outcome. Never moves again.
	StatusTerminal = protocol.StatusTerminal
)

// Outcome is how a terminal admission ended; set exactly when the status is
// terminal (a CHECK constraint enforces it).
type Outcome = protocol.Outcome

// The outcomes (protocol.Outcome).
const (
	OutcomeCompleted   = protocol.OutcomeCompleted
	OutcomeInterrupted = protocol.OutcomeInterrupted
	OutcomeFailed      = protocol.OutcomeFailed
	OutcomeCancelled   = protocol.OutcomeCancelled
)

// Waiting reasons of a queued receipt (protocol.WaitReason).
const (
	WaitBusy     = protocol.WaitBusy
	WaitCapacity = protocol.WaitCapacity
	WaitUnknown  = protocol.WaitUnknown
)

// Errors. Each maps to one wire reason in the daemon.
var (
	ErrSessionNotFound   = errors.New("session not found")                                     // not_found
	ErrNotFound          = errors.New("admission not found")                                   // not_found
	ErrConflict          = errors.New("input_id already admitted with another payload")        // admission_conflict
	ErrCancelled         = errors.New("input_id was admitted and then cancelled")              // cancelled
	ErrNotQueued         = errors.New("admission is no longer queued")                         // not_queued
	ErrUnknownExecution  = errors.New("an unknown admission needs an operator decision first") // unknown_execution
	ErrStaleGeneration   = errors.New("execution generation is not the live one")              // stale_generation
	ErrIllegalTransition = errors.New("illegal admission transition")                          // internal: a bug or a lost race
	ErrNothingQueued     = errors.New("nothing to claim")                                      // internal to the scheduler
	ErrSessionBusy       = errors.New("session runs a turn")                                   // session_busy
	ErrQueueFull         = errors.New("the session's queue is full")                           // overloaded
)

// Admission is one session_admissions row.
type Admission struct {
	AdmissionID         string         `db:"admission_id"`
	SessionID           string         `db:"target_session_id"`
	InputID             string         `db:"request_id"`
	Seq                 int64          `db:"seq"`
	Status              Status         `db:"status"`
	Outcome             sql.NullString `db:"outcome"`
	ExecutionGeneration sql.NullInt64  `db:"execution_generation"`
	// Daemon is the daemon that started the row (column owner_epoch, a
	// boot epoch); set when started or unknown.
	Daemon        sql.Null[cluster.DaemonID] `db:"owner_epoch"`
	Text          string                     `db:"text"`
	Attachments   sql.NullString             `db:"attachments"`
	PayloadDigest string                     `db:"payload_digest"`
	Error         sql.NullString             `db:"error"`
	CreatedAt     string                     `db:"created_at"`
	StartedAt     sql.NullString             `db:"started_at"`
	SettledAt     sql.NullString             `db:"settled_at"`
	// LeaseEpoch is the session's lease_epoch under which this daemon
	// claimed the row (not stored on it: Claim sets it); 0 when unknown.
	LeaseEpoch cluster.LeaseEpoch `db:"-"`
	// Sender and ResolvedBy are JSON {"id","label","client","version"}
	// (protocol.Sender): who admitted the input, and who resolved it after a
	// crash. NULL when unknown (rows older than migration 0003).
	Sender     sql.NullString `db:"sender"`
	ResolvedBy sql.NullString `db:"resolved_by"`
	// QueueOrder orders the FIFO: the queued admission with the lowest
	// (QueueOrder, Seq) runs next (delivery.go).
	QueueOrder int64 `db:"queue_order"`
	// Delivery is queue, steer or interrupt (protocol.Delivery).
	Delivery protocol.Delivery `db:"delivery"`
	// SteeredInto is the admission of the turn this steer was taken into;
	// the steer then shares its status and generation.
	SteeredInto sql.NullString `db:"steered_into"`
	// EditedDigest is the payload digest after the last prompt.update
	// (PayloadDigest keeps the original's); NULL when never updated.
	EditedDigest sql.NullString `db:"edited_digest"`
}

const columns = `admission_id, target_session_id, request_id, seq, status, outcome, execution_generation,
	owner_epoch, text, attachments, payload_digest, error, created_at, started_at, settled_at, sender, resolved_by,
	queue_order, delivery, steered_into, edited_digest`

// Receipt is the wire shape of an admission (PROTOCOL.md section 4); it is
// also the payload of admission.updated events.
type Receipt = protocol.Receipt

// Receipt converts a row to its wire shape, without Text.
func (a Admission) Receipt() Receipt {
	r := Receipt{AdmissionID: a.AdmissionID, SessionID: a.SessionID, InputID: a.InputID, Seq: a.Seq,
		Status: a.Status, Error: a.Error.String, CreatedAt: a.CreatedAt}
	if a.Outcome.Valid {
		o := Outcome(a.Outcome.String)
		r.Outcome = &o
	}
	if a.ExecutionGeneration.Valid {
		g := a.ExecutionGeneration.Int64
		r.ExecutionGeneration = &g
	}
	if a.Sender.Valid {
		r.Sender = protocol.DecodeSender([]byte(a.Sender.String))
	}
	if a.ResolvedBy.Valid {
		r.ResolvedBy = protocol.DecodeSender([]byte(a.ResolvedBy.String))
	}
	r.Delivery = a.Delivery
	r.SteeredInto = a.SteeredInto.String
	return r
}

// Generation is the execution generation, 0 when never started.
func (a Admission) Generation() int64 { return a.ExecutionGeneration.Int64 }

var inputIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidInputID reports whether id is 1-128 characters of [A-Za-z0-9._:-].
func ValidInputID(id string) bool { return inputIDPattern.MatchString(id) }

// Digest is the payload digest that decides duplicate vs conflict: sha256
// over the text and the attachments' JSON as given (the daemon passes it
// canonicalized: sorted keys, no insignificant whitespace), hex.
func Digest(text string, attachments json.RawMessage) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(text), text)
	if len(attachments) > 0 {
		h.Write([]byte{0})
		h.Write(attachments)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Queue performs the FIFO's transitions against the store. Daemon is this
// daemon's id (its boot_epoch): the owner_daemon of the sessions it owns,
// stamped as owner_epoch on the rows it claims and the prompts it opens.
// MaxQueued, when > 0, bounds the queued admissions of one session
// (limits.max_queued_per_session); Admit refuses new inputs beyond it with
// ErrQueueFull.
//
// Label is this daemon's cluster.label (sessions pinned to another label are never taken
// by it), OnTake runs in the transaction that takes a session (the boot
// rules beyond the FIFO: closing its open prompts as fenced), and Bus, when
// set, carries the wake-ups to other daemons.
type Queue struct {
	DB        *store.DB
	Daemon    cluster.DaemonID
	MaxQueued int
	Label     string
	OnTake    func(tx *store.Tx, sessionID string) error
	Bus       *cluster.Bus
}

func get(q store.Queryer, where string, args ...any) (Admission, error) {
	var a Admission
	err := q.Get(&a, `SELECT `+columns+` FROM session_admissions WHERE `+where, args...)
	return a, err
}

// Get returns one admission of sessionID; ErrNotFound when there is none.
func (q *Queue) Get(ctx context.Context, sessionID, admissionID string) (Admission, error) {
	var a Admission
	err := q.DB.Get(ctx, &a, `SELECT `+columns+` FROM session_admissions WHERE admission_id = ? AND target_session_id = ?`, admissionID, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	return a, err
}

// fifoOrder orders a session's open admissions: started and unknown ones
// first, then the queued ones in the order they will run.
const fifoOrder = ` ORDER BY CASE WHEN status = 'queued' THEN 1 ELSE 0 END, queue_order, seq`

// Pending returns every non-terminal admission of sessionID: the started
// or unknown ones (a turn and the steers taken into it) first, then the
// queued ones in the order they will run.
func Pending(q store.Queryer, sessionID string) ([]Admission, error) {
	var out []Admission
	err := q.Select(&out, `SELECT `+columns+` FROM session_admissions
		WHERE status <> 'terminal' AND target_session_id = ?`+fifoOrder, sessionID)
	return out, store.Classify(err)
}

// PendingBounded is Pending for snapshots: at most limit admissions (those
// that run first), texts cut to maxText bytes in SQL; more says
// others exist.
// d is the store's driver (store.DB.Driver), for the byte cut.
func PendingBounded(q store.Queryer, d store.Driver, sessionID string, limit, maxText int) (out []Admission, more bool, err error) {
	cols := strings.Replace(columns, "text,", "coalesce("+d.BytePrefix("text", "?")+", '') AS text,", 1)
	err = q.Select(&out, `SELECT `+cols+` FROM session_admissions
		WHERE status <> 'terminal' AND target_session_id = ?`+fifoOrder+` LIMIT ?`, maxText, sessionID, limit+1)
	if len(out) > limit {
		out, more = out[:limit], true
	}
	for i := range out {
		out[i].Text = strings.ToValidUTF8(out[i].Text, "")
	}
	return out, more, store.Classify(err)
}

// AdmitRequest is what prompt.submit asks to admit.
type AdmitRequest struct {
	SessionID   string
	InputID     string
	Text        string
	Attachments json.RawMessage // nil when none
	// Sender is who submits it, JSON {"id","label","client","version"}
	// (protocol.Sender); nil stores NULL. A duplicate keeps the first sender.
	Sender json.RawMessage
	// Take, when set, makes the admitting daemon the session's owner in the
	// same transaction when it has no live owner (Queue.Take), so that the
	// daemon that got the input runs it rather than whichever daemon hears
	// of it first. The daemon sets it while it has free capacity.
	Take bool
	// WhenBusy is prompt.submit's when_busy (PROTOCOL.md 10.2); "" is
	// queue. It matters only while the session is busy (a turn runs, or
	// an admission is queued or unknown): steer admits the input for the
	// running turn, ahead of the queued ones; interrupt puts it at the
	// front and records a durable interrupt of the running turn
	// (Receipt's caller interrupts it: AdmitResult.Interrupt); reject
	// refuses with ErrSessionBusy and stores nothing.
	WhenBusy protocol.WhenBusy
	// Start, when set, folds the claim into the admit: when the session is
	// idle (no started or unknown admission, nothing queued ahead of the new
	// one) and this daemon owns it (after Take), the same transaction also
	// starts the new admission as Claim would (the next execution
	// generation, the user message, admission.updated and turn.started
	// after the admit's own admission.updated), so that an input to an idle
	// session costs one commit. Start then runs in that commit's hook, after
	// the commit and before its turn.started is published, like ClaimWith's
	// onClaimed; it must not block. The caller sets it only while it can
	// run the turn now (a reserved scheduler slot: Scheduler.Reserve).
	Start func(Admission)
}

// Admit commits a queued admission for req, or returns the existing one
// with duplicate=true when (session, input_id) was admitted before with the
// same payload. Errors: ErrSessionNotFound, ErrConflict (same input_id,
// other payload), ErrCancelled (that admission was cancelled), ErrQueueFull,
// store.ErrUnavailable (nothing was committed). The returned admission is
// committed when Admit returns nil. atCapacity tells whether the daemon-wide
// limit is reached, for the receipt's reason; it may be nil.
//
// With a Bus, an admit that leaves its admission queued in a session that
// another daemon owns, or none, notifies ChannelSessions in its commit;
// in a session of q's own daemon it notifies nothing: the caller wakes its
// own scheduler (Scheduler.Wake), and on PostgreSQL the commits of
// notifying transactions wait for each other.
func (q *Queue) Admit(ctx context.Context, req AdmitRequest, atCapacity func() bool) (Receipt, error) {
	res, err := q.AdmitWith(ctx, req, atCapacity)
	return res.Receipt, err
}

// AdmitResult is what AdmitWith did: the receipt, and Interrupt, the
// execution generation of the running turn that a when_busy interrupt
// asked to stop (0 when none): the caller interrupts it (Scheduler.Interrupt)
// when it runs here; the request is durable (sessions.interrupt_generation)
// and announced on the Bus for another owner.
//
// Started says the admit also claimed the admission (AdmitRequest.Start):
// the receipt is then the started one (status started, its
// execution_generation), and Start ran.
type AdmitResult struct {
	Receipt   Receipt
	Interrupt int64
	Started   bool
}

// AdmitWith is Admit returning an AdmitResult.
func (q *Queue) AdmitWith(ctx context.Context, req AdmitRequest, atCapacity func() bool) (AdmitResult, error) {
	digest := Digest(req.Text, req.Attachments)
	var rec Receipt
	var res AdmitResult
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("admit")
		res = AdmitResult{}
		// First the seq, whose update locks the session's row: a
		// concurrent admit of the same input_id waits here, then finds
		// this one's row (the digest dedupe below). The owner comes back
		// with it, so whether to wake another daemon (below) costs no
		// statement of its own; on PostgreSQL the lock costs none either.
		var row struct {
			Seq   int64                      `db:"seq"`
			Owner sql.Null[cluster.DaemonID] `db:"owner_daemon"`
		}
		err := tx.Get(&row, `UPDATE sessions SET next_admission_seq = next_admission_seq + 1
			WHERE session_id = ? RETURNING next_admission_seq - 1 AS seq, owner_daemon`, req.SessionID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrSessionNotFound, req.SessionID)
		} else if err != nil {
			return err
		}
		tx.NoteLocked(req.SessionID)
		seq := row.Seq
		mine := q.mine(ownerRow{Daemon: row.Owner})
		existing, err := get(tx, `target_session_id = ? AND request_id = ?`, req.SessionID, req.InputID)
		switch {
		case err == nil:
			if existing.PayloadDigest != digest && existing.EditedDigest.String != digest {
				return &InputError{Err: ErrConflict, InputID: req.InputID, AdmissionID: existing.AdmissionID}
			}
			if existing.Outcome.String == string(OutcomeCancelled) {
				return &InputError{Err: ErrCancelled, InputID: req.InputID, AdmissionID: existing.AdmissionID}
			}
			rec = existing.Receipt()
			rec.Duplicate = true
			if existing.Status == StatusQueued {
				if rec.Reason, err = waitReason(tx, existing, atCapacity); err != nil {
					return err
				}
			}
			return errDuplicate // rolls the seq back: nothing is written
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var busy busyState
		if req.WhenBusy != "" && req.WhenBusy != protocol.WhenBusyQueue {
			// Only the other modes need to know (index seeks, no scan).
			if busy, err = sessionBusy(tx, req.SessionID); err != nil {
				return err
			}
		}
		if busy.any() && req.WhenBusy == protocol.WhenBusyReject {
			return fmt.Errorf("%w: session %s %s; when_busy reject stores nothing", ErrSessionBusy, req.SessionID, busy)
		}
		// seq-1 admissions came before this one: a session with fewer than
		// MaxQueued of them cannot have MaxQueued queued, and the count (a
		// scan of its queued rows) is skipped. (A refusal rolls the seq
		// back with the rest.)
		if q.MaxQueued > 0 && seq > int64(q.MaxQueued) {
			var queued int
			if err := tx.Get(&queued, `SELECT count(*) FROM session_admissions
				WHERE status <> 'terminal' AND target_session_id = ? AND status = 'queued'`, req.SessionID); err != nil {
				return err
			}
			if queued >= q.MaxQueued {
				return fmt.Errorf("%w: %d inputs wait in session %s (limits.max_queued_per_session); retry with backoff", ErrQueueFull, queued, req.SessionID)
			}
		}
		if req.Take && !mine { // already its owner: nothing to take
			o, err := q.owner(tx, req.SessionID)
			if err != nil {
				return err
			}
			if !q.mine(o) && q.takeable(o) {
				// Losing the race to another daemon is fine: it runs it.
				switch _, err := q.take(tx, req.SessionID, o); {
				case err == nil:
					mine = true
				case !errors.Is(err, ErrNotOwner):
					return err
				}
			}
		}
		a := Admission{AdmissionID: "adm_" + uuid.Must(uuid.NewV7()).String(), SessionID: req.SessionID,
			InputID: req.InputID, Seq: seq, Status: StatusQueued, Text: req.Text,
			PayloadDigest: digest, CreatedAt: store.Now(), QueueOrder: seq, Delivery: protocol.DeliveryQueue}
		if busy.any() {
			switch req.WhenBusy {
			case protocol.WhenBusySteer:
				a.Delivery = protocol.DeliverySteer
			case protocol.WhenBusyInterrupt:
				a.Delivery = protocol.DeliveryInterrupt
			}
		}
		if len(req.Attachments) > 0 {
			a.Attachments = sql.NullString{String: string(req.Attachments), Valid: true}
		}
		if len(req.Sender) > 0 {
			a.Sender = sql.NullString{String: string(req.Sender), Valid: true}
		}
		if _, err := tx.Exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status,
			text, attachments, payload_digest, created_at, sender, queue_order, delivery) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)`,
			a.AdmissionID, a.SessionID, a.InputID, a.Seq, a.Text, a.Attachments, a.PayloadDigest, a.CreatedAt, a.Sender,
			a.QueueOrder, a.Delivery); err != nil {
			return err
		}
		if a.Delivery != protocol.DeliveryQueue {
			if a.QueueOrder, err = placePriority(tx, a); err != nil {
				return err
			}
		}
		if a.Delivery == protocol.DeliveryInterrupt && busy.Running != "" {
			// Durable, so that the owner (this daemon or another) stops
			// the turn even if the caller dies now.
			if _, err := tx.Exec(`UPDATE sessions SET interrupt_generation = ? WHERE session_id = ?`, busy.Generation, req.SessionID); err != nil {
				return err
			}
			res.Interrupt = busy.Generation
		}
		rec = a.Receipt()
		// Fold the claim in when nothing is ahead of the input and the
		// session is this daemon's (the capacity is the caller's reserved
		// slot, so it is not asked).
		var fold bool
		var o ownerRow
		if req.Start != nil && a.Delivery == protocol.DeliveryQueue {
			reason, err := waitReason(tx, a, nil)
			if err != nil {
				return err
			}
			if reason == "" {
				if o, err = q.owner(tx, req.SessionID); err != nil {
					return err
				}
				fold = q.mine(o)
			}
		}
		if !fold {
			if rec.Reason, err = waitReason(tx, a, atCapacity); err != nil {
				return err
			}
		}
		// The admit event carries the text, so that other clients can show
		// a queued input before it starts.
		ev := rec
		ev.Text = a.Text
		if _, err := tx.AppendEvent(a.SessionID, protocol.EventAdmissionUpdated, a.AdmissionID, 0, ev); err != nil {
			return err
		}
		if fold {
			// The claim's writes and events follow the admit's: clients see
			// admission.updated queued, then started, then turn.started.
			switch started, err := q.claimHead(tx, req.SessionID, o, req.Start); {
			case err == nil:
				tx.Label("admit+claim")
				res.Started = true
				rec = started.Receipt()
				return nil
			case !errors.Is(err, ErrNothingQueued): // nothing written then: it stays queued
				return err
			}
		}
		if q.Bus != nil {
			// The session's owner may be another daemon: wake it. This
			// daemon's own scheduler is the caller's to wake
			// (Scheduler.Wake): a notification to every daemon would be
			// read by none but this one, and on PostgreSQL the commits of
			// notifying transactions queue behind each other (pg_notify
			// takes a database-wide lock from its COMMIT until the end).
			if !mine {
				q.Bus.Notify(tx, cluster.ChannelSessions, a.SessionID)
			}
		}
		return nil
	})
	if errors.Is(err, errDuplicate) {
		err = nil
	}
	res.Receipt = rec
	return res, store.Classify(err)
}

// errDuplicate ends the transaction of an admit whose input_id is already
// admitted with the same payload: it rolls back the seq it reserved, and
// AdmitWith answers the existing admission's receipt. On SQLite that
// admission may be an earlier caller's of the same group commit, not yet
// committed: InTx then returns errDuplicate only once the COMMIT succeeded,
// and the COMMIT's error when it failed (store's
// TestGroupCommitFailureReachesCallersThatFailed).
var errDuplicate = errors.New("admission: input_id already admitted")

// InputError is Admit's refusal of an input_id that names an existing
// admission: Err is ErrConflict or ErrCancelled, AdmissionID that
// admission's id (the wire error's data.admission_id).
type InputError struct {
	Err                  error
	InputID, AdmissionID string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("%v: input_id %q is admission %s", e.Err, e.InputID, e.AdmissionID)
}

func (e *InputError) Unwrap() error { return e.Err }

// waitReason says why the queued admission a waits, from the store's view of
// its session and the scheduler's capacity.
func waitReason(q store.Queryer, a Admission, atCapacity func() bool) (protocol.WaitReason, error) {
	// Three index seeks on session_admissions_open, whatever the queue length.
	var ahead struct {
		Unknown bool `db:"unknown"`
		Started bool `db:"started"`
		Queued  bool `db:"queued"`
	}
	if err := q.Get(&ahead, `SELECT
		EXISTS (SELECT 1 FROM session_admissions WHERE status <> 'terminal' AND status = 'unknown' AND target_session_id = ?) AS unknown,
		EXISTS (SELECT 1 FROM session_admissions WHERE status <> 'terminal' AND status = 'started' AND target_session_id = ?) AS started,
		EXISTS (SELECT 1 FROM session_admissions WHERE status <> 'terminal' AND status = 'queued' AND target_session_id = ?
		        AND (queue_order < ? OR (queue_order = ? AND seq < ?))) AS queued`,
		a.SessionID, a.SessionID, a.SessionID, a.QueueOrder, a.QueueOrder, a.Seq); err != nil {
		return "", err
	}
	switch {
	case ahead.Unknown:
		return WaitUnknown, nil
	case ahead.Started:
		return WaitBusy, nil
	case atCapacity != nil && atCapacity():
		return WaitCapacity, nil
	case ahead.Queued:
		return WaitBusy, nil
	}
	return "", nil
}

// WaitReasons annotates queued receipts of one session, in seq order, with
// why they wait (see waitReason), without touching the store.
func WaitReasons(pending []Receipt, atCapacity bool) {
	var blocked protocol.WaitReason
	for i := range pending {
		switch pending[i].Status {
		case StatusUnknown:
			blocked = WaitUnknown
		case StatusStarted:
			if blocked == "" {
				blocked = WaitBusy
			}
		case StatusQueued:
			switch {
			case blocked != "":
				pending[i].Reason = blocked
			case atCapacity:
				pending[i].Reason = WaitCapacity
			case i > 0:
				pending[i].Reason = WaitBusy
			}
		}
	}
}

// Claim starts the first queued admission of sessionID (lowest queue_order,
// then seq) in one
// transaction: it increments sessions.execution_generation, stamps that
// generation and q.Daemon on the row, appends the user message to the
// transcript, and appends admission.updated and turn.started events.
// Refused with ErrSessionBusy while the session has a started admission,
// ErrUnknownExecution while it has an unknown one, ErrNothingQueued when
// nothing waits.
func (q *Queue) Claim(ctx context.Context, sessionID string) (Admission, error) {
	return q.ClaimWith(ctx, sessionID, nil)
}

// ClaimWith is Claim with onClaimed run after the commit and before the
// transaction's events are published (on the committer goroutine; it must
// not block), so that whoever hears turn.started finds the turn registered.
//
// Only the session's owner claims: a session that is unowned, or whose
// owner's lease expired, is taken first (Take, in its own transaction, so
// that the boot rules it applies commit even when nothing can be claimed);
// one owned by another live daemon is refused with ErrNotOwner.
func (q *Queue) ClaimWith(ctx context.Context, sessionID string, onClaimed func(Admission)) (Admission, error) {
	a, err := q.claim(ctx, sessionID, onClaimed)
	if errors.Is(err, errTakeFirst) {
		if _, _, err := q.Take(ctx, sessionID); err != nil {
			return Admission{}, err
		}
		a, err = q.claim(ctx, sessionID, onClaimed)
	}
	if errors.Is(err, ErrSessionNotFound) {
		return Admission{}, ErrNothingQueued
	}
	if errors.Is(err, errTakeFirst) {
		return Admission{}, ErrNotOwner // taken and lost again meanwhile
	}
	return a, err
}

// errTakeFirst: the session has no live owner; Take it, then claim.
var errTakeFirst = errors.New("take the session first")

func (q *Queue) claim(ctx context.Context, sessionID string, onClaimed func(Admission)) (Admission, error) {
	var a Admission
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("claim")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		o, err := q.owner(tx, sessionID)
		if err != nil {
			return err
		}
		if !q.mine(o) {
			if q.takeable(o) {
				return errTakeFirst
			}
			return ErrNotOwner
		}
		switch st, err := holder(tx, sessionID); {
		case err != nil:
			return err
		case st == StatusUnknown:
			return ErrUnknownExecution
		case st == StatusStarted:
			return ErrSessionBusy
		}
		a, err = q.claimHead(tx, sessionID, o, onClaimed)
		return err
	})
	return a, store.Classify(err)
}

// claimHead starts the head of sessionID's FIFO in tx, for its owner o
// (this daemon; the caller checked): the next execution generation, the
// user message, admission.updated and turn.started. onClaimed, when not
// nil, runs in the commit hook before those events are published.
// ErrNothingQueued when nothing is queued or a started or unknown
// admission holds the session (nothing was written then).
func (q *Queue) claimHead(tx *store.Tx, sessionID string, o ownerRow, onClaimed func(Admission)) (Admission, error) {
	var a Admission
	// One guarded statement takes the head of the FIFO and stamps the
	// next generation; the NOT EXISTS guard makes a second started row
	// impossible whatever the caller checked.
	err := tx.Get(&a, `UPDATE session_admissions
		SET status = 'started',
		    execution_generation = (SELECT execution_generation + 1 FROM sessions WHERE session_id = ?),
		    owner_epoch = ?, started_at = ?
		WHERE admission_id = (SELECT admission_id FROM session_admissions
		                      WHERE status <> 'terminal' AND target_session_id = ? AND status = 'queued'
		                      ORDER BY queue_order, seq LIMIT 1)
		  AND status = 'queued'
		  AND NOT EXISTS (SELECT 1 FROM session_admissions
		                  WHERE status <> 'terminal' AND target_session_id = ? AND status IN ('started', 'unknown'))
		RETURNING `+columns, sessionID, q.Daemon, store.Now(), sessionID, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNothingQueued
	} else if err != nil {
		return a, err
	}
	res, err := tx.Exec(`UPDATE sessions SET execution_generation = ? WHERE session_id = ? AND execution_generation = ?`,
		a.Generation(), sessionID, a.Generation()-1)
	if err != nil {
		return a, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return a, fmt.Errorf("%w: generation of session %s moved during claim", ErrIllegalTransition, sessionID)
	}
	a.LeaseEpoch = o.Lease
	if onClaimed != nil {
		claimed := a
		tx.OnCommit(func() { onClaimed(claimed) })
	}
	if _, err := tx.AppendMessage(sessionID, a.AdmissionID, transcript.RoleUser, a.Text, nil, "", ""); err != nil {
		return a, err
	}
	if _, err := tx.AppendEvent(sessionID, protocol.EventAdmissionUpdated, a.AdmissionID, a.Generation(), a.Receipt()); err != nil {
		return a, err
	}
	started := protocol.TurnStartedPayload{InputID: a.InputID, Text: a.Text}
	if a.Sender.Valid {
		started.Sender = protocol.DecodeSender([]byte(a.Sender.String))
	}
	_, err = tx.AppendEvent(sessionID, protocol.EventTurnStarted, a.AdmissionID, a.Generation(), started)
	return a, err
}

// SettleHook runs inside a settle or resolve transaction, e.g. to close the
// turn's open prompts. resolution is the prompt.closed resolution to use.
type SettleHook func(tx *store.Tx, a Admission, resolution string) error

// Settle ends the started admission a (its generation must match) with
// outcome, which must be completed, interrupted or failed; errText is kept
// for failed turns. A turn that did not complete gets its transcript closed
// (synthetic results for tool calls that never ran, then a boundary). Emits
// admission.updated and turn.completed. hook, when not nil, runs first in
// the same transaction. Errors: ErrStaleGeneration when the row is not
// started with that generation any more, ErrNotFound.
func (q *Queue) Settle(ctx context.Context, a Admission, outcome Outcome, errText string, hook SettleHook) (Admission, error) {
	out, _, err := q.SettleNext(ctx, a, outcome, errText, hook, nil)
	return out, err
}

// SettleNext is Settle folding the claim of the session's next input into
// the settle's transaction: when next is not nil, this daemon still owns
// the session and an admission is queued (and nothing unknown holds the
// FIFO), the same commit that settles a also starts the head of the FIFO
// as Claim would, its events after a's turn.completed, and next runs in
// that commit's hook before they are published (like ClaimWith's
// onClaimed; it must not block). started is the claimed admission, its
// AdmissionID "" when nothing was claimed. The caller passes next only
// while it can run the turn (the slot of the turn it settles). Errors are
// Settle's; nothing to claim is not one.
func (q *Queue) SettleNext(ctx context.Context, a Admission, outcome Outcome, errText string, hook SettleHook, next func(Admission)) (settled, started Admission, err error) {
	if outcome == OutcomeCancelled {
		return a, started, fmt.Errorf("%w: a started admission cannot be cancelled", ErrIllegalTransition)
	}
	if a.Generation() <= 0 {
		// transition treats generation 0 as "any": a started row always has one.
		return a, started, fmt.Errorf("%w: execution_generation must be positive", ErrStaleGeneration)
	}
	var out Admission
	err = q.DB.InTx(ctx, func(tx *store.Tx) error {
		started = Admission{}
		tx.Label("settle")
		if err := tx.LockSessions(a.SessionID); err != nil {
			return err
		}
		// The fence: a daemon that lost the session settles nothing.
		// (A stale admission or generation is explained by transition.)
		if err := a.Execution().Check(tx); err != nil {
			if fe := (*FenceError)(nil); !errors.As(err, &fe) || fe.Owner {
				return err
			}
		}
		if cur, err := get(tx, `admission_id = ? AND target_session_id = ?`, a.AdmissionID, a.SessionID); err == nil && cur.SteeredInto.Valid && cur.Status == StatusStarted {
			return fmt.Errorf("%w: admission %s is a steer taken into %s and settles with it", ErrIllegalTransition, a.AdmissionID, cur.SteeredInto.String)
		}
		if hook != nil {
			res := "interrupted"
			if outcome == OutcomeCompleted {
				res = "fenced"
			}
			if err := hook(tx, a, res); err != nil {
				return err
			}
		}
		var err error
		out, err = transition(tx, a.SessionID, a.AdmissionID, StatusStarted, a.Generation(), outcome, errText)
		if err != nil {
			return err
		}
		if outcome != OutcomeCompleted {
			ending := transcript.Interrupted()
			if outcome == OutcomeFailed {
				ending = transcript.Failed(errText)
			}
			if err := closeTurn(tx, a.SessionID, a.AdmissionID, ending); err != nil {
				return err
			}
		}
		if _, err := tx.AppendEvent(a.SessionID, protocol.EventAdmissionUpdated, a.AdmissionID, a.Generation(), out.Receipt()); err != nil {
			return err
		}
		if err := settleSteers(tx, out, StatusStarted, outcome, errText, sql.NullString{}); err != nil {
			return err
		}
		payload := protocol.TurnCompletedPayload{Outcome: outcome, Error: errText}
		if _, err = tx.AppendEvent(a.SessionID, protocol.EventTurnCompleted, a.AdmissionID, a.Generation(), payload); err != nil || next == nil {
			return err
		}
		// The next input, in the same commit: turn N is terminal before
		// turn N+1 starts, and a crash leaves either both or neither.
		o, err := q.owner(tx, a.SessionID)
		if err != nil || !q.mine(o) {
			return err
		}
		if st, err := holder(tx, a.SessionID); err != nil || st != "" {
			return err
		}
		switch c, err := q.claimHead(tx, a.SessionID, o, next); {
		case err == nil:
			started = c
			tx.Label("settle+claim")
		case !errors.Is(err, ErrNothingQueued):
			return err
		}
		return nil
	})
	return out, started, store.Classify(err)
}

// transition moves one row from `from` (with generation gen when gen > 0)
// to terminal/outcome in one guarded statement, and explains zero rows.
func transition(tx *store.Tx, sessionID, admissionID string, from Status, gen int64, outcome Outcome, errText string) (Admission, error) {
	var a Admission
	err := tx.Get(&a, `UPDATE session_admissions SET status = 'terminal', outcome = ?, error = ?, settled_at = ?
		WHERE admission_id = ? AND target_session_id = ? AND status = ? AND (? = 0 OR execution_generation = ?)
		RETURNING `+columns, string(outcome), sql.NullString{String: errText, Valid: errText != ""}, store.Now(),
		admissionID, sessionID, string(from), gen, gen)
	if errors.Is(err, sql.ErrNoRows) {
		return a, explain(tx, sessionID, admissionID, from, gen)
	}
	return a, err
}

// explain turns a guarded statement's zero rows into a typed error.
func explain(tx *store.Tx, sessionID, admissionID string, from Status, gen int64) error {
	cur, err := get(tx, `admission_id = ? AND target_session_id = ?`, admissionID, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s in session %s", ErrNotFound, admissionID, sessionID)
	} else if err != nil {
		return err
	}
	switch {
	case from == StatusQueued && cur.Status == StatusUnknown:
		return fmt.Errorf("%w: admission %s is unknown", ErrUnknownExecution, admissionID)
	case from == StatusQueued:
		return fmt.Errorf("%w: admission %s is %s", ErrNotQueued, admissionID, cur.Status)
	case cur.Status != from:
		return fmt.Errorf("%w: admission %s is %s, not %s", ErrStaleGeneration, admissionID, cur.Status, from)
	default:
		return fmt.Errorf("%w: admission %s runs generation %d, not %d", ErrStaleGeneration, admissionID, cur.Generation(), gen)
	}
}

// Cancel moves a queued admission to terminal/cancelled. Errors:
// ErrNotFound, ErrNotQueued (started or terminal), ErrUnknownExecution.
func (q *Queue) Cancel(ctx context.Context, sessionID, admissionID string) (Admission, error) {
	var out Admission
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("cancel")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		var err error
		if out, err = transition(tx, sessionID, admissionID, StatusQueued, 0, OutcomeCancelled, ""); err != nil {
			return err
		}
		_, err = tx.AppendEvent(sessionID, protocol.EventAdmissionUpdated, admissionID, 0, out.Receipt())
		return err
	})
	return out, store.Classify(err)
}

// ResolveUnknown is the operator's decision that the unknown admission will
// not run again: it moves to terminal/interrupted, its transcript is closed
// with a boundary, and the FIFO behind it may move on. It never re-runs the
// input. Errors: ErrNotFound, ErrStaleGeneration (not unknown, or gen
// differs).
func (q *Queue) ResolveUnknown(ctx context.Context, sessionID, admissionID string, gen int64, hook SettleHook) (Admission, error) {
	return q.ResolveUnknownBy(ctx, sessionID, admissionID, gen, nil, hook)
}

// ResolveUnknownBy is ResolveUnknown recording who decided: by is JSON
// {"id","label","client","version"} (protocol.Sender) stored in resolved_by and
// carried by the receipt and its admission.updated event; nil records none.
func (q *Queue) ResolveUnknownBy(ctx context.Context, sessionID, admissionID string, gen int64, by json.RawMessage, hook SettleHook) (Admission, error) {
	var out Admission
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("resolve_unknown")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		if gen <= 0 { // transition treats 0 as "any generation"; explain instead
			return explain(tx, sessionID, admissionID, StatusUnknown, gen)
		}
		// A steer taken into the lost turn is closed with it: resolving
		// either resolves the turn and every steer taken into it.
		asked := admissionID
		if cur, err := get(tx, `admission_id = ? AND target_session_id = ?`, admissionID, sessionID); err == nil &&
			cur.Status == StatusUnknown && cur.SteeredInto.Valid {
			admissionID = cur.SteeredInto.String
		}
		var err error
		if out, err = transition(tx, sessionID, admissionID, StatusUnknown, gen, OutcomeInterrupted, ""); err != nil {
			return err
		}

		if len(by) > 0 {
			out.ResolvedBy = sql.NullString{String: string(by), Valid: true}
			if _, err := tx.Exec(`UPDATE session_admissions SET resolved_by = ? WHERE admission_id = ?`, out.ResolvedBy, admissionID); err != nil {
				return err
			}
		}
		if hook != nil {
			if err := hook(tx, out, "fenced"); err != nil {
				return err
			}
		}
		if err := closeTurn(tx, sessionID, admissionID, transcript.Lost()); err != nil {
			return err
		}
		if q.Bus != nil {
			// The queue behind it may move on, on whichever daemon owns it.
			q.Bus.Notify(tx, cluster.ChannelSessions, sessionID)
		}
		if _, err := tx.AppendEvent(sessionID, protocol.EventAdmissionUpdated, admissionID, gen, out.Receipt()); err != nil {
			return err
		}
		if _, err = tx.AppendEvent(sessionID, protocol.EventTurnCompleted, admissionID, gen, protocol.TurnCompletedPayload{Outcome: OutcomeInterrupted, Error: "resolved by operator after a crash"}); err != nil {
			return err
		}
		if err = settleSteers(tx, out, StatusUnknown, OutcomeInterrupted, "", out.ResolvedBy); err != nil {
			return err
		}
		if asked != admissionID {
			out, err = get(tx, `admission_id = ?`, asked)
		}
		return err
	})
	return out, store.Classify(err)
}

// CrashedWhileRunning is the synthetic tool result of a command that was
// running when the daemon died (it has a tool.running event but no result).
const CrashedWhileRunning = transcript.CrashedWhileRunning

// RecoverResult reports what Recover did.
type RecoverResult struct {
	Unknown  []Admission // started rows of earlier processes, now unknown
	Sessions []string    // sessions with queued admissions to schedule
	Taken    []Taken     // the sessions taken
}

// Recover is the boot step, run before the server listens: q's daemon takes
// every session that needs an owner and has none alive (TakeOrphans with no
// capacity bound: started rows of earlier daemons become unknown, each with
// an admission.updated event, and OnTake closes their prompts); hook, when
// not nil, runs in the same transaction. It returns the sessions this
// daemon owns that have queued admissions, oldest first.
func (q *Queue) Recover(ctx context.Context, hook func(tx *store.Tx) error) (RecoverResult, error) {
	var res RecoverResult
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("recover")
		res = RecoverResult{}
		taken, err := q.takeOrphans(tx, -1, true)
		if err != nil {
			return err
		}
		res.Taken = taken
		for _, t := range taken {
			res.Unknown = append(res.Unknown, t.Unknown...)
		}
		if hook != nil {
			if err := hook(tx); err != nil {
				return err
			}
		}
		return tx.Select(&res.Sessions, `SELECT a.target_session_id FROM session_admissions a
			WHERE a.status <> 'terminal' AND a.status = 'queued'
			AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = a.target_session_id AND s.owner_daemon = ?)
			GROUP BY a.target_session_id ORDER BY MIN(a.created_at), a.target_session_id`, q.Daemon)
	})
	return res, store.Classify(err)
}
