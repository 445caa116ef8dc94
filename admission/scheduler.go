package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sessiond/sessiond/store"
)

// Turn is one claimed admission handed to the Executor.
type Turn struct {
	Admission Admission
}

// Result is how the Executor says a turn ended. Outcome is completed or
// failed (with Error); the scheduler itself settles interrupted turns.
//
// Finish, when not nil, runs first in the settle transaction, whatever the
// outcome (e.g. the model's final answer, written in the same commit as the
// turn's end). If it fails with anything but a store failure (which the
// settle retries), the turn settles failed without it, naming the error.
type Result struct {
	Outcome Outcome
	Error   string
	Finish  func(tx *store.Tx) error
}

// finishError marks a Result.Finish failure inside a settle.
type finishError struct{ err error }

func (e *finishError) Error() string { return "finish the turn: " + e.err.Error() }
func (e *finishError) Unwrap() error { return e.err }

// Executor runs one turn to its end. ctx is cancelled on session.interrupt
// and on graceful stop; Run must then stop its tools and return promptly.
// Whatever Run returns after its ctx was cancelled, the turn settles
// interrupted.
type Executor interface {
	Run(ctx context.Context, t Turn) Result
}

// ErrStopping is the cancel cause of turns interrupted by a graceful stop.
var ErrStopping = errors.New("daemon stopping")

// errSettling is the cancel cause once the executor returned.
var errSettling = errors.New("turn settling")

// ErrInterrupted is the cancel cause of turns stopped by session.interrupt.
var ErrInterrupted = errors.New("turn interrupted")

// ErrLeaseLost is the cancel cause of turns stopped because this daemon
// lost their session: its lease could not be renewed in time (self-fencing)
// or another daemon took the session. Their settle is fenced unless
// nobody took the session meanwhile.
var ErrLeaseLost = errors.New("this daemon lost the session's lease")

type run struct {
	a      Admission
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	final  Admission
	err    error
}

// Scheduler starts queued admissions: at most one started per session and
// at most Max across the daemon. It wakes on admit, settle and resolve
// (Wake), never polls, and settles each turn once, from the goroutine that
// ran it.
type Scheduler struct {
	q    *Queue
	exec Executor
	max  int
	hook SettleHook
	log  *slog.Logger

	claimMu    sync.Mutex // held by a scheduling pass; Stop takes it to fence claims
	mu         sync.Mutex
	running    map[string]*run  // by session
	candidates map[string]int64 // sessions that may have claimable work, by order of arrival
	order      int64
	stopping   bool
	fenced     bool // self-fenced: no claims until Unfence
	wake       chan struct{}
	loopDone   chan struct{}
	runs       sync.WaitGroup
	ctx        context.Context
	cancel     context.CancelFunc
	// A claim that failed on the store is retried by a timer, because
	// nothing else may wake an idle daemon: claimRetry is the pending
	// timer (nil if none), claimBackoff its delay, doubled per failure.
	claimRetry   *time.Timer
	claimBackoff time.Duration
	// Claims folded into another transaction (an admit holding a
	// Reservation, a settle claiming its session's next input): reserved
	// slots count against max until they start or are released, and Stop
	// waits for the transactions in flight (reserving) before it cancels
	// the running turns, so that none starts after that.
	reserved  map[string]bool // sessions with a reserved slot
	reserving sync.WaitGroup
	// deferred: sessions whose Wake came while their turn ran (the pass
	// dropped them); the end of that turn wakes them again.
	deferred map[string]bool
}

// Backoff bounds of the retries after a store failure (claim and settle).
// Variables only so that tests can shorten them.
var (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// NewScheduler returns a scheduler over q. max is
// limits.max_concurrent_turns (≥ 1). hook runs inside every settle
// transaction (closing the turn's prompts).
func NewScheduler(q *Queue, exec Executor, max int, hook SettleHook, log *slog.Logger) *Scheduler {
	if max < 1 {
		max = 1
	}
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{q: q, exec: exec, max: max, hook: hook, log: log,
		running: map[string]*run{}, candidates: map[string]int64{}, reserved: map[string]bool{}, deferred: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Start launches the scheduling loop; sessions lists the sessions with
// queued work found by Recover.
func (s *Scheduler) Start(sessions []string) {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.loopDone = make(chan struct{})
	s.Wake(sessions...)
	go s.loop()
}

// Wake tells the scheduler that these sessions may have claimable work.
func (s *Scheduler) Wake(sessionIDs ...string) {
	s.mu.Lock()
	for _, id := range sessionIDs {
		if _, ok := s.candidates[id]; !ok {
			s.order++
			s.candidates[id] = s.order
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// AtCapacity reports whether every slot is taken now: by a running turn,
// or by a claim in flight (a Reservation, the scheduling pass's claim).
func (s *Scheduler) AtCapacity() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takenLocked() >= s.max
}

// takenLocked is how many slots are taken: running turns and claims in
// flight (Reservations, the scheduling pass's claim).
func (s *Scheduler) takenLocked() int { return len(s.running) + len(s.reserved) }

// Running returns the admission running in sessionID, if any.
func (s *Scheduler) Running(sessionID string) (Admission, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.running[sessionID]
	if !ok {
		return Admission{}, false
	}
	return r.a, true
}

// RunningSessions returns the sessions with a turn running now.
func (s *Scheduler) RunningSessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.running))
	for id := range s.running {
		ids = append(ids, id)
	}
	return ids
}

// RunningCount is the number of turns running now.
func (s *Scheduler) RunningCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

func (s *Scheduler) loop() {
	defer close(s.loopDone)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		s.schedule()
	}
}

// schedule claims for candidate sessions, oldest first, while there is
// capacity.
func (s *Scheduler) schedule() {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	for {
		s.mu.Lock()
		if s.stopping || s.fenced || s.takenLocked() >= s.max || len(s.candidates) == 0 {
			s.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(s.candidates))
		for id := range s.candidates {
			if _, busy := s.running[id]; busy || s.reserved[id] {
				delete(s.candidates, id) // its settle (or admit) wakes it again
				s.deferred[id] = true
				continue
			}
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return s.candidates[ids[i]] < s.candidates[ids[j]] })
		s.mu.Unlock()
		if len(ids) == 0 {
			return
		}
		progressed := false
		for _, id := range ids {
			s.mu.Lock()
			stop := s.stopping || s.fenced || s.takenLocked() >= s.max
			if !stop {
				// Taken off before the claim, never after: a Wake that
				// arrives while the claim runs (an admit, or the settle of
				// a turn that already finished) must survive to the next
				// pass, or that session's queue would stall.
				delete(s.candidates, id)
				// The slot is the claim's while it runs, like a
				// Reservation's: an admit+claim or a settle+claim folded
				// meanwhile must not count it free.
				s.reserved[id] = true
			}
			s.mu.Unlock()
			if stop || s.ctx.Err() != nil {
				return
			}
			// The run is registered in the claim's commit hook, before
			// turn.started goes out, so an interrupt that follows it finds it.
			_, err := s.q.ClaimWith(s.ctx, id, func(a Admission) {
				s.mu.Lock()
				delete(s.reserved, a.SessionID)
				s.startLocked(a)
				s.mu.Unlock()
			})
			s.mu.Lock()
			delete(s.reserved, id)
			s.mu.Unlock()
			switch {
			case err == nil:
				progressed = true
				s.mu.Lock()
				s.claimBackoff = 0
				s.mu.Unlock()
			case errors.Is(err, ErrNothingQueued), errors.Is(err, ErrUnknownExecution), errors.Is(err, ErrSessionBusy), errors.Is(err, ErrSessionNotFound),
				errors.Is(err, ErrNotOwner):
				// Nothing to start here; the next admit, settle or resolve
				// wakes it (another daemon owns it: that one runs it).
			default:
				// The store failed: keep the session a candidate and try
				// again after a backoff, since no admit or settle may come.
				s.mu.Lock()
				if _, ok := s.candidates[id]; !ok {
					s.order++
					s.candidates[id] = s.order
				}
				d := s.retryClaimLocked()
				s.mu.Unlock()
				s.log.Error("claim failed; retrying", "session_id", id, "retry_in", d, "err", err)
			}
		}
		if !progressed {
			return
		}
	}
}

// Reservation is a scheduler slot held for one idle session while the
// admit of an input to it commits (AdmitRequest.Start = Reservation.Start),
// so that the admit may start the input in its own transaction. Release it
// when the admit returned, whatever happened.
type Reservation struct {
	s         *Scheduler
	sessionID string
	started   bool
}

// Reserve holds a slot for sessionID when a turn could start there now:
// the scheduler is neither stopping nor fenced, no turn of the session runs
// or is reserved, and a slot is free beyond the running turns, the other
// reservations and the sessions already waiting for one (they go first).
// It returns nil otherwise; the admit then only queues the input and the
// scheduler claims it (Wake).
func (s *Scheduler) Reserve(sessionID string) *Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.fenced || s.reserved[sessionID] || s.ctx == nil || s.ctx.Err() != nil {
		return nil
	}
	if _, busy := s.running[sessionID]; busy {
		return nil
	}
	waiting := len(s.candidates)
	if _, ok := s.candidates[sessionID]; ok {
		waiting--
	}
	if s.takenLocked()+waiting >= s.max {
		return nil
	}
	s.reserved[sessionID] = true
	s.reserving.Add(1)
	return &Reservation{s: s, sessionID: sessionID}
}

// Start registers the turn of a, claimed by the admit's transaction, and
// starts running it: the commit hook of that transaction (it must run
// before the turn's events are published).
func (r *Reservation) Start(a Admission) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.started = true
	delete(r.s.reserved, r.sessionID)
	r.s.startLocked(a)
}

// AtCapacity is Scheduler.AtCapacity for the admit that holds r: every
// slot but r's own is taken (r's is the input's if it starts now, and free
// again when it does not).
func (r *Reservation) AtCapacity() bool {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.takenLocked()
	if !r.started && s.reserved[r.sessionID] {
		n--
	}
	return n >= s.max
}

// Release ends the reservation: a slot that did not start a turn is free
// again (and the sessions waiting for one are woken).
func (r *Reservation) Release() {
	s := r.s
	s.mu.Lock()
	if !r.started {
		delete(s.reserved, r.sessionID)
		if s.deferred[r.sessionID] { // a Wake dropped while it was reserved
			delete(s.deferred, r.sessionID)
			if _, ok := s.candidates[r.sessionID]; !ok {
				s.order++
				s.candidates[r.sessionID] = s.order
			}
		}
		if len(s.candidates) > 0 {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
	s.mu.Unlock()
	s.reserving.Done()
}

// retryClaimLocked arms the claim retry timer unless one is pending and
// returns its delay: retryMin, doubling per consecutive failure up to
// retryMax.
func (s *Scheduler) retryClaimLocked() time.Duration {
	if s.claimRetry != nil || s.stopping {
		return s.claimBackoff
	}
	s.claimBackoff = min(max(2*s.claimBackoff, retryMin), retryMax)
	s.claimRetry = time.AfterFunc(s.claimBackoff, func() {
		s.mu.Lock()
		s.claimRetry = nil
		s.mu.Unlock()
		s.Wake()
	})
	return s.claimBackoff
}

func (s *Scheduler) startLocked(a Admission) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	r := &run{a: a, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	// A claim that committed after the self-fence or the graceful stop
	// began (it was in flight then: a scheduling pass, an admit+claim, a
	// settle+claim) starts a turn that is stopped at once, like those
	// that ran then.
	switch {
	case s.fenced:
		cancel(ErrLeaseLost)
	case s.stopping:
		cancel(ErrStopping)
	}
	s.running[a.SessionID] = r
	s.runs.Add(1)
	go s.execute(ctx, r)
}

func (s *Scheduler) execute(ctx context.Context, r *run) {
	defer s.runs.Done()
	res := s.exec.Run(ctx, Turn{Admission: r.a})
	outcome, errText := res.Outcome, res.Error
	if cause := context.Cause(ctx); cause != nil {
		outcome, errText = OutcomeInterrupted, ""
		if errors.Is(cause, ErrStopping) {
			errText = "daemon stopping"
		}
		if errors.Is(cause, ErrLeaseLost) {
			errText = "this daemon lost the session's lease"
		}
	}
	if outcome != OutcomeCompleted && outcome != OutcomeFailed && outcome != OutcomeInterrupted {
		outcome, errText = OutcomeFailed, "executor returned no outcome"
	}
	// The execution stops being live before its settle commits, so that
	// nobody who hears turn.completed can still answer its prompts.
	r.cancel(errSettling)
	// Settle with a context that survives the interrupt, so the terminal
	// state is committed before anyone hears the turn ended. Retry for as
	// long as the store is unavailable: a live daemon must not leave a
	// started row behind, or the session would start nothing more. Only a
	// graceful stop that gave up waiting (Stop's ctx ended) abandons it;
	// the row then becomes unknown at the next boot.
	next := s.foldNext(ctx, r)
	final, started, err := s.settle(r, outcome, errText, res.Finish, next)
	if fe := (*finishError)(nil); errors.As(err, &fe) {
		s.log.Error("a turn's final write failed; settling it failed without it", "admission_id", r.a.AdmissionID, "err", fe.err)
		final, started, err = s.settle(r, OutcomeFailed, fmt.Sprintf("persist the turn's end: %v", fe.err), nil, next)
	}
	if next != nil {
		s.reserving.Done()
	}
	switch {
	case errors.Is(err, ErrFenced) || (err != nil && errors.Is(context.Cause(ctx), ErrLeaseLost)):
		s.log.Warn("the turn was fenced: another daemon owns its session now, which applied the boot rules to it; nothing more of it was written",
			"admission_id", r.a.AdmissionID, "err", err)
	case err != nil:
		s.log.Error("settle failed; the admission stays started and becomes unknown at the next boot",
			"admission_id", r.a.AdmissionID, "err", err)
	}
	s.mu.Lock()
	r.final, r.err = final, err
	if s.running[r.a.SessionID] == r { // else the settle started the next turn in its place
		delete(s.running, r.a.SessionID)
	}
	close(r.done)
	// A settle that could claim (next) and started nothing found nothing
	// queued in its transaction: the session needs another pass only if a
	// Wake for it was dropped while the turn ran (an admit that committed
	// after that settle woke it itself, or started its input).
	deferred := s.deferred[r.a.SessionID]
	delete(s.deferred, r.a.SessionID)
	s.mu.Unlock()
	if err == nil && started.AdmissionID != "" {
		return // the slot went to the session's next turn
	}
	switch {
	case err != nil:
		s.Wake()
	case next == nil || deferred:
		s.Wake(r.a.SessionID)
	}
	// A freed slot may let other sessions start.
	s.mu.Lock()
	if len(s.candidates) > 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// foldNext returns the hook that lets r's settle claim its session's next
// input in the same transaction (Queue.SettleNext), taking r's slot, or nil
// when it must not: the scheduler is stopping or fenced, r lost its lease,
// or other sessions wait for a slot (they go first: the settle frees it and
// the scheduling pass claims for them). A non-nil hook counts in reserving
// until the settle returned (the caller calls Done).
func (s *Scheduler) foldNext(ctx context.Context, r *run) func(Admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.fenced || s.ctx.Err() != nil || errors.Is(context.Cause(ctx), ErrLeaseLost) || errors.Is(context.Cause(ctx), ErrStopping) {
		return nil
	}
	waiting := len(s.candidates)
	if _, ok := s.candidates[r.a.SessionID]; ok {
		waiting--
	}
	if s.takenLocked()-1+waiting >= s.max {
		return nil
	}
	s.reserving.Add(1)
	return func(a Admission) {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.candidates, a.SessionID) // started: a Wake for it is answered
		s.startLocked(a)
	}
}

// settle settles r, running finish (when not nil) first in the same
// transaction and claiming the session's next input with next (when not
// nil; Queue.SettleNext), retrying store failures with a backoff from
// retryMin to retryMax until it commits, fails for good (stale, not found,
// illegal, a finishError) or the scheduler is torn down.
func (s *Scheduler) settle(r *run, outcome Outcome, errText string, finish func(*store.Tx) error, next func(Admission)) (Admission, Admission, error) {
	hook := s.hook
	if finish != nil {
		hook = func(tx *store.Tx, a Admission, resolution string) error {
			if err := finish(tx); err != nil {
				if store.Classify(err) != err || errors.Is(err, store.ErrUnavailable) {
					return err // a store failure: retried
				}
				return &finishError{err}
			}
			if s.hook != nil {
				return s.hook(tx, a, resolution)
			}
			return nil
		}
	}
	backoff := retryMin
	for attempt := 1; ; attempt++ {
		final, started, err := s.q.SettleNext(context.Background(), r.a, outcome, errText, hook, next)
		if err == nil || !isRetryable(err) {
			return final, started, err
		}
		if attempt == 1 || attempt%10 == 0 {
			s.log.Warn("settle failed; retrying until the store recovers",
				"admission_id", r.a.AdmissionID, "attempt", attempt, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return final, Admission{}, err
		}
		backoff = min(2*backoff, retryMax)
	}
}

func isRetryable(err error) bool {
	var fe *finishError
	return !errors.Is(err, ErrStaleGeneration) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrIllegalTransition) &&
		!errors.As(err, &fe)
}

// Interrupt stops the turn running in sessionID and waits until it settled
// terminal/interrupted. gen, when > 0, must be the running generation
// (ErrStaleGeneration otherwise). It returns the settled admission, or
// ok=false when no turn runs.
func (s *Scheduler) Interrupt(ctx context.Context, sessionID string, gen int64) (Admission, bool, error) {
	s.mu.Lock()
	r, ok := s.running[sessionID]
	s.mu.Unlock()
	if !ok {
		return Admission{}, false, nil
	}
	if gen > 0 && gen != r.a.Generation() {
		return Admission{}, false, ErrStaleGeneration
	}
	r.cancel(ErrInterrupted)
	select {
	case <-r.done:
		if r.err == nil && r.final.Outcome.String != string(OutcomeInterrupted) {
			// The turn ended on its own before the interrupt reached it
			// (it was already settling): nothing was interrupted.
			return Admission{}, false, nil
		}
		return r.final, true, r.err
	case <-ctx.Done():
		return r.a, true, ctx.Err()
	}
}

// Stop is the graceful stop: no new claims, every running turn is
// cancelled with ErrStopping and settled interrupted, and Stop returns
// when they all settled or ctx ends. Queued admissions stay queued.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	// Wait for a scheduling pass in progress: a claim it committed starts
	// its turn, which is then interrupted like every running turn.
	s.claimMu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier: it waits for the pass that holds claimMu
	s.claimMu.Unlock()
	// The same for the claims folded into admits and settles in flight
	// (no new one begins once stopping is set).
	reserved := make(chan struct{})
	go func() { s.reserving.Wait(); close(reserved) }()
	select {
	case <-reserved:
	case <-ctx.Done():
	}
	s.mu.Lock()
	for _, r := range s.running {
		r.cancel(ErrStopping)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.runs.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	if s.claimRetry != nil {
		s.claimRetry.Stop()
		s.claimRetry = nil
	}
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
		<-s.loopDone
	}
	return err
}

// FreeSlots is how many more turns may start now: the slots neither a
// running turn nor a claim in flight holds (0 while stopping or fenced).
func (s *Scheduler) FreeSlots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.fenced {
		return 0
	}
	return max(s.max-s.takenLocked(), 0)
}

// Fence is the self-fence of a daemon that could not renew its lease: no
// claims until Unfence, and every running turn is cancelled with
// ErrLeaseLost (its tools stop and its commands are killed). It does not
// wait for them.
func (s *Scheduler) Fence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fenced = true
	for _, r := range s.running {
		r.cancel(ErrLeaseLost)
	}
}

// Unfence lets claims start again after the lease was renewed.
func (s *Scheduler) Unfence() {
	s.mu.Lock()
	s.fenced = false
	s.mu.Unlock()
	s.Wake()
}

// Abandon cancels the turn running in sessionID with ErrLeaseLost (another
// daemon took the session): its command is killed and its writes, the
// settle included, are refused by the fence. It reports whether one ran.
func (s *Scheduler) Abandon(sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.running[sessionID]
	if ok {
		r.cancel(ErrLeaseLost)
	}
	return ok
}

// IsLive reports whether execution e runs in this daemon now (same
// admission, generation and owner epoch) and has not been asked to stop
// (interrupt, graceful stop, lost lease). Prompt answers are accepted only
// while this holds; the durable half of the fence is Execution.Check.
func (s *Scheduler) IsLive(e Execution) bool {
	s.mu.Lock()
	r, ok := s.running[e.SessionID]
	s.mu.Unlock()
	return ok && r.a.Execution().Same(e) && r.ctx.Err() == nil
}
