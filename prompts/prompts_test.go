package prompts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/fixtures/storetest"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/store"
)

// deadline bounds every "it happens soon" wait; generous for -race.
const deadline = 20 * time.Second

type env struct {
	db *store.DB
	m  *prompts.Manager
	// live is m's live check (the scheduler's IsLive in the daemon): every
	// execution counts as live unless a test says otherwise (setLive).
	liveMu sync.Mutex
	live   func(admission.Execution) bool

	mu     sync.Mutex
	events []store.Event
	seen   chan struct{} // signalled on every event
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), storetest.Options(t, store.Options{Synchronous: "NORMAL"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{db: db, seen: make(chan struct{}, 1)}
	e.m = prompts.NewManager(db, 1, liveFunc(e.isLive), nil)
	db.SetEventSink(func(ev store.Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
		select {
		case e.seen <- struct{}{}:
		default:
		}
	})
	return e
}

func (e *env) isLive(x admission.Execution) bool {
	e.liveMu.Lock()
	defer e.liveMu.Unlock()
	return e.live == nil || e.live(x)
}

func (e *env) setLive(f func(admission.Execution) bool) {
	e.liveMu.Lock()
	e.live = f
	e.liveMu.Unlock()
}

func (e *env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Exec(q, args...)
		return err
	}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// addSession inserts a session whose generation is gen.
func (e *env) addSession(t *testing.T, id string, gen int64) {
	e.exec(t, `INSERT INTO sessions (session_id, cwd, model, provider, base_url, toolsets, created_at, execution_generation)
		VALUES (?, '/tmp', 'm', 'openai', 'http://127.0.0.1:1/v1', '["terminal","clarify"]', ?, ?)`, id, store.Now(), gen)
}

// addStarted inserts a started admission of session with gen and epoch.
func (e *env) addStarted(t *testing.T, session, admission string, seq, gen, epoch int64) {
	e.exec(t, `INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status,
		execution_generation, owner_epoch, text, payload_digest, created_at, started_at)
		VALUES (?, ?, ?, ?, 'started', ?, ?, 'text', 'digest', ?, ?)`, admission, session, "in-"+admission, seq, gen, epoch, store.Now(), store.Now())
	// The daemon that started it owns the session (admission.Execution).
	e.exec(t, `UPDATE sessions SET owner_daemon = ? WHERE session_id = ?`, epoch, session)
}

// waitEvent waits for an event matching f and returns it.
func (e *env) waitEvent(t *testing.T, what string, f func(store.Event) bool) store.Event {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		e.mu.Lock()
		for _, ev := range e.events {
			if f(ev) {
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
		select {
		case <-e.seen:
		case <-timer.C:
			t.Fatalf("no %s event within %v; events: %v", what, deadline, e.types())
		}
	}
}

func (e *env) types() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.events {
		out = append(out, ev.Type+" "+string(ev.Payload))
	}
	return out
}

func (e *env) closedEvents(promptID string) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, ev := range e.events {
		var p map[string]any
		json.Unmarshal(ev.Payload, &p)
		if ev.Type == "prompt.closed" && p["prompt_id"] == promptID {
			out = append(out, p)
		}
	}
	return out
}

type askResult struct {
	out prompts.Outcome
	err error
	at  time.Time
}

// ask runs m.Ask in a goroutine and returns the prompt id once its
// prompt.opened event was committed, and the channel of its result.
func (e *env) ask(t *testing.T, ctx context.Context, m *prompts.Manager, a prompts.Ask) (string, <-chan askResult) {
	t.Helper()
	done := make(chan askResult, 1)
	go func() {
		out, err := m.Ask(ctx, a)
		done <- askResult{out, err, time.Now()}
	}()
	var id string
	e.waitEvent(t, "prompt.opened of "+a.AdmissionID, func(ev store.Event) bool {
		var p struct {
			Prompt struct {
				PromptID    string `json:"prompt_id"`
				AdmissionID string `json:"admission_id"`
			} `json:"prompt"`
		}
		json.Unmarshal(ev.Payload, &p)
		if ev.Type == "prompt.opened" && p.Prompt.AdmissionID == a.AdmissionID && !e.taken(p.Prompt.PromptID) {
			id = p.Prompt.PromptID
			return true
		}
		return false
	})
	return id, done
}

var takenMu sync.Mutex
var takenIDs = map[string]bool{}

func (e *env) taken(id string) bool {
	takenMu.Lock()
	defer takenMu.Unlock()
	if takenIDs[id] {
		return true
	}
	takenIDs[id] = true
	return false
}

func wait(t *testing.T, ch <-chan askResult) askResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(deadline):
		t.Fatalf("Ask did not return within %v", deadline)
		return askResult{}
	}
}

func approval(session, admission string, gen int64, pattern string) prompts.Ask {
	return prompts.Ask{SessionID: session, AdmissionID: admission, Generation: gen, Kind: prompts.KindApproval, Timeout: time.Hour,
		Payload: map[string]any{"tool_call_id": "c1", "command": "rm -rf x", "cwd": "/tmp", "risk": "dangerous",
			"reason": "recursive delete", "pattern": pattern, "choices": []string{"once", "session", "always", "deny"}}}
}

func choice(c string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"choice":%q}`, c)) }

type row struct {
	Status     string  `db:"status"`
	Resolution *string `db:"resolution"`
	Response   *string `db:"response"`
	Gen        int64   `db:"execution_generation"`
	Epoch      int64   `db:"owner_epoch"`
	Admission  string  `db:"admission_id"`
}

func (e *env) row(t *testing.T, id string) row {
	t.Helper()
	var r row
	if err := e.db.Get(context.Background(), &r, `SELECT status, resolution, response, execution_generation, owner_epoch, admission_id
		FROM prompts WHERE prompt_id = ?`, id); err != nil {
		t.Fatalf("prompt %s: %v", id, err)
	}
	return r
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func setup(t *testing.T) *env {
	e := newEnv(t)
	e.addSession(t, "s1", 1)
	e.addStarted(t, "s1", "a1", 1, 1, 1)
	return e
}

func TestAskRespondResolvedThenAlreadyResolved(t *testing.T) {
	e := setup(t)
	id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "rm-recursive"))
	if r := e.row(t, id); r.Status != "open" || r.Gen != 1 || r.Epoch != 1 || r.Admission != "a1" {
		t.Fatalf("stored prompt = %+v", r)
	}
	st, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if err != nil || st != prompts.StatusResolved {
		t.Fatalf("first respond = %q, %v", st, err)
	}
	res := wait(t, done)
	if res.err != nil || res.out.Resolution != prompts.ResolutionAnswered || string(res.out.Response) != `{"choice":"once"}` || res.out.PromptID != id {
		t.Fatalf("Ask = %+v, %v", res.out, res.err)
	}
	st, err = e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("deny")})
	if err != nil || st != prompts.StatusAlreadyResolved {
		t.Fatalf("second respond = %q, %v", st, err)
	}
	if r := e.row(t, id); r.Status != "closed" || str(r.Resolution) != "answered" || str(r.Response) != `{"choice":"once"}` {
		t.Fatalf("stored prompt = %+v %s %s", r, str(r.Resolution), str(r.Response))
	}
	closed := e.closedEvents(id)
	if len(closed) != 1 || closed[0]["resolution"] != "answered" || closed[0]["response"].(map[string]any)["choice"] != "once" {
		t.Fatalf("prompt.closed events = %v", closed)
	}
	// once records nothing.
	if ok, err := e.m.Allowed(context.Background(), "s1", "rm-recursive"); ok || err != nil {
		t.Fatalf("once recorded an allowance: %v %v", ok, err)
	}
}

func TestRespondConcurrentFirstAnswerWins(t *testing.T) {
	e := setup(t)
	choices := []string{"once", "deny", "session", "always", "once", "deny", "session", "always"}
	for round := 0; round < 10; round++ {
		pattern := fmt.Sprintf("pat-%d", round)
		id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, pattern))
		start := make(chan struct{})
		type answer struct {
			choice, status string
			err            error
		}
		answers := make(chan answer, len(choices))
		for _, c := range choices {
			go func() {
				<-start
				st, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice(c)})
				answers <- answer{c, st, err}
			}()
		}
		close(start)
		var winners []string
		for range choices {
			a := <-answers
			switch {
			case a.err != nil:
				t.Fatalf("round %d: respond %s: %v", round, a.choice, a.err)
			case a.status == prompts.StatusResolved:
				winners = append(winners, a.choice)
			case a.status != prompts.StatusAlreadyResolved:
				t.Fatalf("round %d: status %q", round, a.status)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d answers resolved (%v), want exactly 1", round, len(winners), winners)
		}
		res := wait(t, done)
		if string(res.out.Response) != string(choice(winners[0])) {
			t.Fatalf("round %d: the waiter got %s, the winner was %s", round, res.out.Response, winners[0])
		}
		if r := e.row(t, id); str(r.Response) != string(choice(winners[0])) {
			t.Fatalf("round %d: stored %s, winner %s", round, str(r.Response), winners[0])
		}
		if n := len(e.closedEvents(id)); n != 1 {
			t.Fatalf("round %d: %d prompt.closed events", round, n)
		}
		// Only the winner's choice may have been recorded.
		sess, _ := e.m.Allowed(context.Background(), "s1", pattern)
		other, _ := e.m.Allowed(context.Background(), "s-other", pattern)
		if want := winners[0] == "session" || winners[0] == "always"; sess != want || other != (winners[0] == "always") {
			t.Fatalf("round %d: winner %s but Allowed(s1)=%v Allowed(other)=%v", round, winners[0], sess, other)
		}
	}
}

func TestRespondWrongGenerationIsStale(t *testing.T) {
	e := setup(t)
	id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "p"))
	for _, gen := range []int64{0, 2, -1} {
		_, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: gen, Answer: choice("once")})
		if !errors.Is(err, prompts.ErrStaleGeneration) {
			t.Fatalf("generation %d: err = %v, want ErrStaleGeneration", gen, err)
		}
	}
	if r := e.row(t, id); r.Status != "open" {
		t.Fatalf("a stale answer closed the prompt: %+v", r)
	}
	if st, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("deny")}); err != nil || st != prompts.StatusResolved {
		t.Fatalf("respond = %q %v", st, err)
	}
	wait(t, done)
}

func TestRespondNotFound(t *testing.T) {
	e := setup(t)
	e.addSession(t, "s2", 0)
	id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "p"))
	for name, r := range map[string]prompts.Response{
		"another session's prompt": {SessionID: "s2", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")},
		"unknown session":          {SessionID: "nope", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")},
		"never issued":             {SessionID: "s1", PromptID: "prm_never", Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")},
		"wrong kind":               {SessionID: "s1", PromptID: id, Kind: prompts.KindClarify, Generation: 1, Answer: json.RawMessage(`{"answer":"x"}`)},
	} {
		if _, err := e.m.Respond(context.Background(), r); !errors.Is(err, prompts.ErrNotFound) {
			t.Fatalf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
	if r := e.row(t, id); r.Status != "open" {
		t.Fatalf("prompt closed: %+v", r)
	}
	e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("deny")})
	wait(t, done)
}

func TestCloseForAdmissionWakesAndFences(t *testing.T) {
	e := setup(t)
	id, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "p"))
	if err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
		return e.m.CloseForAdmission(tx, "s1", "a1", prompts.ResolutionInterrupted)
	}); err != nil {
		t.Fatal(err)
	}
	res := wait(t, done)
	if res.out.Resolution != prompts.ResolutionInterrupted || len(res.out.Response) != 0 {
		t.Fatalf("Ask = %+v %v", res.out, res.err)
	}
	if closed := e.closedEvents(id); len(closed) != 1 || closed[0]["resolution"] != "interrupted" {
		t.Fatalf("prompt.closed = %v", closed)
	}
	_, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if !errors.Is(err, prompts.ErrStaleGeneration) {
		t.Fatalf("respond after close: %v, want ErrStaleGeneration", err)
	}
	if r := e.row(t, id); str(r.Resolution) != "interrupted" || r.Response != nil {
		t.Fatalf("stored = %+v", r)
	}
}

// A prompt whose execution is no longer live (Liveness false: interrupt
// requested, settled, or another generation runs) refuses answers.
type liveFunc func(admission.Execution) bool

func (f liveFunc) IsLive(x admission.Execution) bool { return f(x) }

func TestRespondNotLiveIsStale(t *testing.T) {
	e := setup(t)
	var mu sync.Mutex
	live := true
	e.setLive(func(x admission.Execution) bool {
		mu.Lock()
		defer mu.Unlock()
		return live && x.SessionID == "s1" && x.AdmissionID == "a1" && x.Generation == 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id, done := e.ask(t, ctx, e.m, approval("s1", "a1", 1, "p"))
	mu.Lock()
	live = false
	mu.Unlock()
	_, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if !errors.Is(err, prompts.ErrStaleGeneration) {
		t.Fatalf("err = %v, want ErrStaleGeneration", err)
	}
	if r := e.row(t, id); r.Status != "open" {
		t.Fatalf("stored = %+v", r)
	}
	cancel()
	wait(t, done)
}

// The admission row is no longer started with the prompt's generation
// (settled without closing the prompt, or a later generation runs): the
// answer is refused even if the in-memory check says live.
func TestRespondAdmissionSettledIsStale(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id, done := e.ask(t, ctx, e.m, approval("s1", "a1", 1, "p"))
	e.exec(t, `UPDATE session_admissions SET status = 'terminal', outcome = 'interrupted' WHERE admission_id = 'a1'`)
	_, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if !errors.Is(err, prompts.ErrStaleGeneration) {
		t.Fatalf("err = %v, want ErrStaleGeneration", err)
	}
	if r := e.row(t, id); r.Status != "open" || r.Response != nil {
		t.Fatalf("stored = %+v", r)
	}
	cancel()
	wait(t, done)
}

func TestFenceEarlierEpochs(t *testing.T) {
	e := setup(t)
	e.addSession(t, "s2", 1)
	e.addStarted(t, "s2", "b1", 1, 1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	old, oldDone := e.ask(t, ctx, e.m, approval("s1", "a1", 1, "p"))
	cancel() // the old daemon is gone; its prompt stays open in the store
	wait(t, oldDone)

	m2 := prompts.NewManager(e.db, 2, liveFunc(e.isLive), nil)
	cur, curDone := e.ask(t, context.Background(), m2, approval("s2", "b1", 1, "p"))
	if err := e.db.InTx(context.Background(), func(tx *store.Tx) error { return m2.FenceEarlierEpochs(tx) }); err != nil {
		t.Fatal(err)
	}
	if r := e.row(t, old); r.Status != "closed" || str(r.Resolution) != "fenced" {
		t.Fatalf("old prompt = %+v %s", r, str(r.Resolution))
	}
	closed := e.closedEvents(old)
	if len(closed) != 1 || closed[0]["resolution"] != "fenced" {
		t.Fatalf("prompt.closed of the old prompt = %v", closed)
	}
	if r := e.row(t, cur); r.Status != "open" {
		t.Fatalf("the live epoch's prompt was fenced: %+v", r)
	}
	// Known only from the store: stale, whichever manager is asked.
	for _, m := range []*prompts.Manager{m2, e.m} {
		_, err := m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: old, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
		if !errors.Is(err, prompts.ErrStaleGeneration) {
			t.Fatalf("respond to a fenced prompt: %v, want ErrStaleGeneration", err)
		}
	}
	// Even an open prompt of an earlier epoch is stale for the new daemon.
	e.exec(t, `UPDATE prompts SET status = 'open', resolution = NULL, closed_at = NULL WHERE prompt_id = ?`, old)
	_, err := m2.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: old, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if !errors.Is(err, prompts.ErrStaleGeneration) {
		t.Fatalf("respond to an open prompt of epoch 1 via epoch 2: %v, want ErrStaleGeneration", err)
	}
	if st, err := m2.Respond(context.Background(), prompts.Response{SessionID: "s2", PromptID: cur, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")}); err != nil || st != prompts.StatusResolved {
		t.Fatalf("live prompt: %q %v", st, err)
	}
	wait(t, curDone)
}

func TestAskTimeoutClosesAndWakes(t *testing.T) {
	e := setup(t)
	a := approval("s1", "a1", 1, "p")
	a.Timeout = 100 * time.Millisecond
	start := time.Now()
	id, done := e.ask(t, context.Background(), e.m, a)
	res := wait(t, done)
	if res.err != nil || res.out.Resolution != prompts.ResolutionTimedOut || res.out.PromptID != id {
		t.Fatalf("Ask = %+v %v", res.out, res.err)
	}
	if took := res.at.Sub(start); took < a.Timeout {
		t.Fatalf("timed out after %v, before its timeout %v", took, a.Timeout)
	}
	if r := e.row(t, id); r.Status != "closed" || str(r.Resolution) != "timed_out" {
		t.Fatalf("stored = %+v", r)
	}
	if closed := e.closedEvents(id); len(closed) != 1 || closed[0]["resolution"] != "timed_out" {
		t.Fatalf("prompt.closed = %v", closed)
	}
	var exp string
	e.db.Get(context.Background(), &exp, `SELECT expires_at FROM prompts WHERE prompt_id = ?`, id)
	if exp == "" {
		t.Fatal("no expires_at")
	}
	// Live execution: a late answer is already_resolved, and changes nothing.
	st, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("always")})
	if err != nil || st != prompts.StatusAlreadyResolved {
		t.Fatalf("late answer = %q %v", st, err)
	}
	if ok, _ := e.m.Allowed(context.Background(), "s1", "p"); ok {
		t.Fatal("a late answer recorded an allowance")
	}
}

func TestAskCancelWakesAtOnce(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	id, done := e.ask(t, ctx, e.m, approval("s1", "a1", 1, "p")) // timeout: an hour
	cancelled := time.Now()
	cancel()
	res := wait(t, done)
	if !errors.Is(res.err, context.Canceled) || res.out.Resolution != prompts.ResolutionInterrupted {
		t.Fatalf("Ask = %+v %v", res.out, res.err)
	}
	if took := res.at.Sub(cancelled); took > 2*time.Second {
		t.Fatalf("Ask returned %v after the cancel", took)
	}
	// The settle closes it; nobody waits any more, which must not block.
	if err := e.db.InTx(context.Background(), func(tx *store.Tx) error {
		return e.m.CloseForAdmission(tx, "s1", "a1", prompts.ResolutionInterrupted)
	}); err != nil {
		t.Fatal(err)
	}
	if r := e.row(t, id); str(r.Resolution) != "interrupted" {
		t.Fatalf("stored = %+v", r)
	}
}

func TestAskNotLive(t *testing.T) {
	e := setup(t)
	for name, a := range map[string]prompts.Ask{
		"wrong generation": approval("s1", "a1", 2, "p"),
		"wrong session":    approval("s2", "a1", 1, "p"),
		"no such":          approval("s1", "zz", 1, "p"),
	} {
		_, err := e.m.Ask(context.Background(), a)
		if !errors.Is(err, prompts.ErrNotLive) {
			t.Fatalf("%s: err = %v, want ErrNotLive", name, err)
		}
	}
	e.exec(t, `UPDATE session_admissions SET owner_epoch = 9 WHERE admission_id = 'a1'`)
	if _, err := e.m.Ask(context.Background(), approval("s1", "a1", 1, "p")); !errors.Is(err, prompts.ErrNotLive) {
		t.Fatalf("other epoch: err = %v, want ErrNotLive", err)
	}
	var n int
	e.db.Get(context.Background(), &n, `SELECT count(*) FROM prompts`)
	if n != 0 {
		t.Fatalf("%d prompts stored for dead executions", n)
	}
}

func TestStopWakesWaiters(t *testing.T) {
	e := setup(t)
	_, done := e.ask(t, context.Background(), e.m, approval("s1", "a1", 1, "p"))
	e.m.Stop()
	if res := wait(t, done); res.out.Resolution != prompts.ResolutionInterrupted {
		t.Fatalf("Ask = %+v %v", res.out, res.err)
	}
}

func TestSessionAndAlwaysRecordPatterns(t *testing.T) {
	e := setup(t)
	e.addSession(t, "s2", 0)
	ctx := context.Background()
	answer := func(pattern, c string) {
		t.Helper()
		id, done := e.ask(t, ctx, e.m, approval("s1", "a1", 1, pattern))
		if st, err := e.m.Respond(ctx, prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice(c)}); err != nil || st != prompts.StatusResolved {
			t.Fatalf("respond %s: %q %v", c, st, err)
		}
		wait(t, done)
	}
	answer("rm-recursive", "session")
	answer("git-push-force", "always")
	answer("chmod-777", "once")
	answer("curl-pipe-shell", "deny")

	for _, c := range []struct {
		session, pattern string
		want             bool
	}{
		{"s1", "rm-recursive", true},
		{"s2", "rm-recursive", false},
		{"s1", "git-push-force", true},
		{"s2", "git-push-force", true},
		{"never-seen", "git-push-force", true},
		{"s1", "chmod-777", false},
		{"s1", "curl-pipe-shell", false},
		{"s1", "", false},
		{"s1", "rm-recursive+git-push-force", false},
	} {
		if got, err := e.m.Allowed(ctx, c.session, c.pattern); err != nil || got != c.want {
			t.Fatalf("Allowed(%s, %q) = %v %v, want %v", c.session, c.pattern, got, err, c.want)
		}
	}
	var sess []string
	e.db.Select(ctx, &sess, `SELECT session_id || '|' || pattern FROM session_approvals ORDER BY 1`)
	if fmt.Sprint(sess) != "[s1|rm-recursive]" {
		t.Fatalf("session_approvals = %v", sess)
	}
	rules, err := e.m.AlwaysAllowed(ctx)
	if err != nil || len(rules) != 1 || rules[0].Pattern != "git-push-force" || rules[0].SourceSessionID.String != "s1" || rules[0].CreatedAt == "" {
		t.Fatalf("AlwaysAllowed = %+v %v", rules, err)
	}
	// Answering session/always again for a recorded pattern is fine.
	answer("rm-recursive", "session")
	answer("git-push-force", "always")
}

func TestClarifyAnswerRoundTrip(t *testing.T) {
	e := setup(t)
	a := prompts.Ask{SessionID: "s1", AdmissionID: "a1", Generation: 1, Kind: prompts.KindClarify, Timeout: time.Hour,
		Payload: map[string]any{"tool_call_id": "q", "questions": []map[string]any{{"id": "q1", "question": "Which?", "choices": []string{"a", "b"}, "multi_select": true}}}}
	id, done := e.ask(t, context.Background(), e.m, a)
	if _, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")}); !errors.Is(err, prompts.ErrNotFound) {
		t.Fatalf("approval answer to a clarify prompt: %v", err)
	}
	if st, err := e.m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindClarify, Generation: 1, Answer: json.RawMessage(`{"answer":["a","b"]}`)}); err != nil || st != prompts.StatusResolved {
		t.Fatalf("respond = %q %v", st, err)
	}
	if res := wait(t, done); string(res.out.Response) != `{"answer":["a","b"]}` {
		t.Fatalf("Ask = %+v", res.out)
	}
	var n int
	e.db.Get(context.Background(), &n, `SELECT count(*) FROM session_approvals`)
	if n != 0 {
		t.Fatal("a clarify answer recorded an approval")
	}
}

// An approval whose prompt offers only once and deny (an escalation)
// remembers nothing when answered session or always: the answer counts as
// once.
func TestChoiceNotOfferedRecordsNothing(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for _, c := range []string{"session", "always"} {
		a := approval("s1", "a1", 1, "sandboxed:rm-recursive")
		a.Payload.(map[string]any)["choices"] = []string{"once", "deny"}
		id, done := e.ask(t, ctx, e.m, a)
		if st, err := e.m.Respond(ctx, prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice(c)}); err != nil || st != prompts.StatusResolved {
			t.Fatalf("respond %s: %q %v", c, st, err)
		}
		wait(t, done)
		if ok, err := e.m.Allowed(ctx, "s1", "sandboxed:rm-recursive"); ok || err != nil {
			t.Fatalf("answered %s to a prompt offering once and deny: remembered (%v, %v)", c, ok, err)
		}
	}
}

// The in-memory half of the fence fails closed: a manager that has no live
// check of its own daemon's executions refuses every answer to a prompt it
// opened (stale_generation), instead of taking the execution as live.
func TestRespondWithoutLiveCheckFailsClosed(t *testing.T) {
	e := setup(t)
	m := prompts.NewManager(e.db, 1, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id, done := e.ask(t, ctx, m, approval("s1", "a1", 1, "p"))
	status, err := m.Respond(context.Background(), prompts.Response{SessionID: "s1", PromptID: id, Kind: prompts.KindApproval, Generation: 1, Answer: choice("once")})
	if !errors.Is(err, prompts.ErrStaleGeneration) || !errors.Is(err, prompts.ErrNoLiveCheck) {
		t.Fatalf("Respond without a live check = %q, %v; want ErrNoLiveCheck (a stale generation)", status, err)
	}
	if r := e.row(t, id); r.Status != "open" || r.Response != nil {
		t.Fatalf("stored = %+v", r)
	}
	cancel()
	wait(t, done)
}
