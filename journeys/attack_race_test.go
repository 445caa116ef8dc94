package journeys

// Adversarial regression races: two answers to one approval, an answer
// against an interrupt, a cancel against the scheduler's claim, concurrent
// resolves of one unknown admission, concurrent creates and submits with the
// same idempotency key, and a submit or an interrupt sent the moment a turn
// ends. Each race is started from a barrier; the rounds vary which side goes
// first.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAttackConcurrentApprovalAnswers: two clients answer the same approval
// at once (once/once, then deny/once). Exactly one answer is "resolved", the
// other "already_resolved"; the command runs at most once, and only if the
// winning answer allowed it.
func TestAttackConcurrentApprovalAnswers(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	const rounds = 6
	// Each round's reply after the tool result waits at a gate until both
	// answers are in: a second answer is already_resolved only while the
	// execution is live; after the turn completed it is stale_generation.
	var after [rounds]*fixtures.Gate
	for i := range rounds {
		after[i] = fixtures.NewGate()
		t.Cleanup(after[i].Release)
		m.On(fmt.Sprintf("approve race %d", i),
			fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(fmt.Sprintf("rm -rf v%d; echo ran >> runs%d.log", i, i))}},
			fixtures.Reply{Text: "done", Gate: after[i]})
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	answerers := [2]*fixtures.Client{d.Dial(t), d.Dial(t)}
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	for i := range rounds {
		r := submit(t, c, s.SessionID, fmt.Sprintf("ar-%d", i), fmt.Sprintf("approve race %d", i))
		p := waitPrompt(t, c, r.AdmissionID, "approval")
		choices := [2]string{"once", "once"}
		if i%2 == 1 {
			choices = [2]string{"deny", "once"}
		}
		var st [2]string
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range answerers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if k == i%2 {
					atkSpin(time.Duration(i) * 50 * time.Microsecond)
				}
				var res respondResult
				errs[k] = atkCall(answerers[k], "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID,
					"execution_generation": p.ExecutionGeneration, "choice": choices[k]}, &res)
				st[k] = res.Status
			}()
		}
		close(start)
		wg.Wait()
		after[i].Release()
		if out := atkWaitTurn(t, c, d, s.SessionID, r.AdmissionID, wait); out != "completed" {
			t.Errorf("round %d: outcome %s", i, out)
		}
		winner := ""
		for k := range st {
			if errs[k] != nil {
				t.Errorf("round %d: answer %q: %v", i, choices[k], errs[k])
			}
			switch st[k] {
			case "resolved":
				if winner != "" {
					t.Errorf("round %d: both answers resolved the prompt (%v)", i, st)
				}
				winner = choices[k]
			case "already_resolved":
			default:
				t.Errorf("round %d: answer %q got status %q", i, choices[k], st[k])
			}
		}
		if winner == "" {
			t.Errorf("round %d: no answer resolved the prompt (%v)", i, st)
		}
		n := atkCountLines(filepath.Join(dir, fmt.Sprintf("runs%d.log", i)))
		if (winner == "deny" && n != 0) || (winner == "once" && n != 1) {
			t.Errorf("round %d: the winning answer was %q and the command ran %d times", i, winner, n)
		}
	}
}

// TestAttackAnswerWhileInterrupt: "once" and session.interrupt at the same
// time. A refused answer never runs the command; an interrupt that reports
// nothing running means the turn completed; once a turn has settled nothing
// of it runs any more (checked again after all the rounds).
func TestAttackAnswerWhileInterrupt(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	const rounds = 6
	for i := range rounds {
		m.On(fmt.Sprintf("interrupt race %d", i),
			fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm(fmt.Sprintf("rm -rf v%d; echo ran >> runs%d.log", i, i))}},
			fixtures.Reply{Text: "done"})
	}
	m.On("last word", fixtures.Reply{Text: "bye"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}")})
	c := d.Dial(t)
	answerer, interrupter := d.Dial(t), d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	ranAtSettle := make([]int, rounds)
	stats := map[string]int{}
	for i := range rounds {
		r := submit(t, c, s.SessionID, fmt.Sprintf("ir-%d", i), fmt.Sprintf("interrupt race %d", i))
		p := waitPrompt(t, c, r.AdmissionID, "approval")
		var respErr, intErr error
		var res respondResult
		var ir struct {
			Interrupted *string `json:"interrupted"`
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				atkSpin(time.Duration(i) * 100 * time.Microsecond)
			}
			respErr = atkCall(answerer, "approval.respond", map[string]any{"session_id": s.SessionID, "prompt_id": p.PromptID,
				"execution_generation": p.ExecutionGeneration, "choice": "once"}, &res)
		}()
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 1 {
				atkSpin(time.Duration(i) * 100 * time.Microsecond)
			}
			intErr = atkCall(interrupter, "session.interrupt", map[string]any{"session_id": s.SessionID}, &ir)
		}()
		close(start)
		wg.Wait()
		t.Logf("round %d: approval.respond -> %q %v; session.interrupt -> %v %v", i, res.Status, respErr, ir.Interrupted, intErr)
		outcome := atkWaitTurn(t, c, d, s.SessionID, r.AdmissionID, wait)
		ranAtSettle[i] = atkCountLines(filepath.Join(dir, fmt.Sprintf("runs%d.log", i)))
		n := ranAtSettle[i]
		interrupted := "null"
		if ir.Interrupted != nil {
			interrupted = *ir.Interrupted
		}
		stats[fmt.Sprintf("respond=%s%s interrupted=%v outcome=%s ran=%d", res.Status, fixtures.ErrorReason(respErr), ir.Interrupted != nil, outcome, n)]++
		if intErr != nil {
			t.Errorf("round %d: session.interrupt: %v", i, intErr)
		}
		if respErr != nil && fixtures.ErrorReason(respErr) != "stale_generation" {
			t.Errorf("round %d: approval.respond: %v, want resolved or stale_generation", i, respErr)
		}
		if respErr == nil && res.Status != "resolved" {
			t.Errorf("round %d: the only answer got %q", i, res.Status)
		}
		if respErr != nil && n != 0 {
			t.Errorf("round %d: the answer was refused (%v) but the command ran", i, respErr)
		}
		if n > 1 {
			t.Errorf("round %d: the command ran %d times", i, n)
		}
		if interrupted != "null" && interrupted != r.AdmissionID {
			t.Errorf("round %d: interrupt names %s, want %s", i, interrupted, r.AdmissionID)
		}
		if interrupted == "null" && outcome != "completed" {
			t.Errorf("round %d: the interrupt found nothing running but the turn ended %s", i, outcome)
		}
		if outcome == "completed" && (respErr != nil || n != 1) {
			t.Errorf("round %d: the turn completed but the answer got %v and the command ran %d times", i, respErr, n)
		}
	}
	// A later turn completes; nothing of a settled turn ran meanwhile.
	r := submit(t, c, s.SessionID, "last", "last word")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("last turn %s", out)
	}
	for i := range rounds {
		if n := atkCountLines(filepath.Join(dir, fmt.Sprintf("runs%d.log", i))); n != ranAtSettle[i] {
			t.Errorf("round %d: the command ran after its turn settled (%d, then %d)", i, ranAtSettle[i], n)
		}
	}
	for k, v := range stats {
		t.Logf("%d × %s", v, k)
	}
}

// TestAttackCancelVsClaim: prompt.cancel of a queued admission exactly when
// the scheduler claims it. Exactly one side wins: a successful cancel means
// the input never reached the model; not_queued means it ran once.
func TestAttackCancelVsClaim(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	const rounds = 12
	gates := make([]*fixtures.Gate, rounds)
	for i := range gates {
		gates[i] = fixtures.NewGate()
		m.On(fmt.Sprintf("blocker %d", i), fixtures.Reply{Text: "blocked", Gate: gates[i]})
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	canceller := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	stats := map[string]int{}
	for i := range rounds {
		blk := submit(t, c, s.SessionID, fmt.Sprintf("blk-%d", i), fmt.Sprintf("blocker %d", i))
		waitParked(t, gates[i], fmt.Sprintf("blocker %d", i))
		tgt := submit(t, c, s.SessionID, fmt.Sprintf("tgt-%d", i), fmt.Sprintf("target %d", i))
		if tgt.Status != "queued" {
			t.Fatalf("round %d: target is %s behind a running turn, want queued", i, tgt.Status)
		}
		var cancelErr error
		var rc receipt
		start := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-start
			atkSpin(time.Duration(i%4) * 200 * time.Microsecond)
			cancelErr = atkCall(canceller, "prompt.cancel", map[string]any{"session_id": s.SessionID, "admission_id": tgt.AdmissionID}, &rc)
		}()
		// The cancel leaves with the release, or when the blocker's reply
		// is in, or when its turn has ended: around the claim of the target.
		gates[i].Release()
		switch i % 3 {
		case 1:
			c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "message.completed" && e.AdmissionID == blk.AdmissionID })
		case 2:
			c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == blk.AdmissionID })
		}
		close(start)
		<-done
		var row fixtures.AdmissionRow
		fixtures.Eventually(t, wait, "the target to settle", func() bool {
			row = admissionRow(t, fixtures.Admissions(t, db, s.SessionID), tgt.AdmissionID)
			return row.Status == "terminal"
		})
		n := len(m.RequestsWithLastUser(fmt.Sprintf("target %d", i)))
		switch reason := fixtures.ErrorReason(cancelErr); {
		case cancelErr == nil:
			stats["cancel won"]++
			if out := rc.Outcome; rc.Status != "terminal" || out == nil || *out != "cancelled" || row.Outcome.String != "cancelled" || n != 0 {
				t.Errorf("round %d: cancel answered %+v; row %s/%s; the model saw the input %d times", i, rc, row.Status, row.Outcome.String, n)
			}
		case reason == "not_queued":
			stats["claim won"]++
			if row.Outcome.String != "completed" || n != 1 {
				t.Errorf("round %d: cancel refused but the row is %s/%s and the model saw the input %d times", i, row.Status, row.Outcome.String, n)
			}
		default:
			t.Errorf("round %d: prompt.cancel: %v", i, cancelErr)
		}
	}
	t.Logf("%v", stats)
}

// TestAttackDoubleResolveUnknown: three concurrent prompt.resolve_unknown
// calls for one unknown admission. Exactly one succeeds, the others get
// stale_generation; one closing boundary; the input is not replayed and the
// admission behind it runs.
func TestAttackDoubleResolveUnknown(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	const rounds = 3
	gates := make([]*fixtures.Gate, rounds)
	for i := range gates {
		gates[i] = fixtures.NewGate()
		m.On(fmt.Sprintf("doomed %d", i), fixtures.Reply{Text: "never", Gate: gates[i]})
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	for i := range rounds {
		r := submit(t, c, s.SessionID, fmt.Sprintf("doomed-%d", i), fmt.Sprintf("doomed %d", i))
		follower := submit(t, c, s.SessionID, fmt.Sprintf("follow-%d", i), fmt.Sprintf("follow %d", i))
		waitParked(t, gates[i], fmt.Sprintf("doomed %d", i))
		d.SIGKILL(t)
		d.Restart(t)
		c = d.Dial(t)
		snap := resume(t, c, s.SessionID)
		var gen int64 = -1
		for _, p := range snap.Pending {
			if p.AdmissionID == r.AdmissionID && p.Status == "unknown" && p.ExecutionGeneration != nil {
				gen = *p.ExecutionGeneration
			}
		}
		if gen < 0 {
			t.Fatalf("round %d: %s is not unknown after the crash: %+v", i, r.AdmissionID, snap.Pending)
		}
		resolvers := []*fixtures.Client{d.Dial(t), d.Dial(t), d.Dial(t)}
		errs := make([]error, len(resolvers))
		recs := make([]receipt, len(resolvers))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range resolvers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[k] = atkCall(resolvers[k], "prompt.resolve_unknown", map[string]any{"session_id": s.SessionID,
					"admission_id": r.AdmissionID, "execution_generation": gen}, &recs[k])
			}()
		}
		close(start)
		wg.Wait()
		ok := 0
		for k, e := range errs {
			switch {
			case e == nil:
				ok++
				if recs[k].Status != "terminal" || recs[k].Outcome == nil || *recs[k].Outcome != "interrupted" {
					t.Errorf("round %d: resolve receipt %+v, want terminal/interrupted", i, recs[k])
				}
			case fixtures.ErrorReason(e) != "stale_generation":
				t.Errorf("round %d: resolve: %v, want success or stale_generation", i, e)
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d resolves succeeded (%v), want exactly 1", i, ok, errs)
		}
		if out := waitTurn(t, c, follower.AdmissionID); out != "completed" {
			t.Errorf("round %d: the follower ended %s", i, out)
		}
		snap = resume(t, d.Dial(t), s.SessionID)
		boundaries := 0
		for _, msg := range snap.Messages {
			if msg.AdmissionID == r.AdmissionID && msg.Role == "boundary" {
				boundaries++
			}
		}
		if boundaries != 1 {
			t.Errorf("round %d: %d boundary rows for the resolved admission, want 1", i, boundaries)
		}
		if n := len(m.RequestsWithLastUser(fmt.Sprintf("doomed %d", i))); n != 1 {
			t.Errorf("round %d: the doomed input reached the model %d times", i, n)
		}
	}
}

// TestAttackConcurrentCreateAndSubmit: the same request_id creates from
// several connections at once make one session; the same input_id submitted
// 40 times at once makes one admission, one fresh receipt and one turn.
func TestAttackConcurrentCreateAndSubmit(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	cwd := t.TempDir()
	clients := make([]*fixtures.Client, 5)
	for i := range clients {
		clients[i] = d.Dial(t)
	}
	const rounds, creates = 5, 10
	for round := range rounds {
		ids := make([]string, creates)
		errs := make([]error, creates)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range creates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var snap snapshot
				errs[k] = atkCall(clients[k%len(clients)], "session.create", map[string]any{"cwd": cwd, "request_id": fmt.Sprintf("create-%d", round), "title": "t"}, &snap)
				ids[k] = snap.SessionID
			}()
		}
		close(start)
		wg.Wait()
		for k := range ids {
			if errs[k] != nil || ids[k] == "" || ids[k] != ids[0] {
				t.Errorf("round %d: create %d -> %q %v (first %q)", round, k, ids[k], errs[k], ids[0])
			}
		}
	}
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM sessions`); err != nil {
		t.Fatal(err)
	}
	if n != rounds {
		t.Errorf("%d sessions for %d distinct request ids", n, rounds)
	}

	s := createSession(t, clients[0], map[string]any{"cwd": cwd})
	const submits = 40
	recs := make([]receipt, submits)
	errs := make([]error, submits)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range submits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[k] = atkCall(clients[k%len(clients)], "prompt.submit", map[string]any{"session_id": s.SessionID, "input_id": "same-input", "text": "same text"}, &recs[k])
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for k := range recs {
		if errs[k] != nil {
			t.Errorf("submit %d: %v", k, errs[k])
			continue
		}
		if !recs[k].Duplicate {
			fresh++
		}
		if recs[k].AdmissionID != recs[0].AdmissionID {
			t.Errorf("two admission ids for one input: %s and %s", recs[0].AdmissionID, recs[k].AdmissionID)
		}
	}
	if fresh != 1 {
		t.Errorf("%d receipts with duplicate=false, want 1", fresh)
	}
	if rows := waitAllTerminal(t, db, s.SessionID); len(rows) != 1 || rows[0].Outcome.String != "completed" {
		t.Errorf("admissions %+v, want one completed", rows)
	}
	if n := len(m.RequestsWithLastUser("same text")); n != 1 {
		t.Errorf("the model saw the input %d times", n)
	}
}

// TestAttackSubmitAsTurnEnds: a client that submits its next input the
// moment it hears turn.completed, while other clients keep the store busy
// (so that the scheduler's claim and the admission share a group commit).
// Every admitted input must start: an admission left queued with nothing
// running in its session is a lost wake-up.
func TestAttackSubmitAsTurnEnds(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)

	// Other clients keep the store's commit loop busy meanwhile.
	stopWriters := atkBusyWriters(t, d, 4)
	const iterations = 60
	for i := range iterations {
		r := submit(t, c, s.SessionID, fmt.Sprintf("next-%d", i), fmt.Sprintf("next %d", i))
		// A trivial turn takes milliseconds; 10 s is far beyond any load.
		if out := atkWaitTurn(t, c, d, s.SessionID, r.AdmissionID, 10*time.Second); out != "completed" {
			t.Fatalf("iteration %d: outcome %s", i, out)
		}
	}
	stopWriters()
}

// TestAttackInterruptAsTurnEnds: session.interrupt sent the moment
// turn.completed arrives finds nothing running: it must answer
// {interrupted: null}, never name the admission that just completed.
func TestAttackInterruptAsTurnEnds(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	stopWriters := atkBusyWriters(t, d, 4)
	defer stopWriters()
	const iterations = 60
	wrong := 0
	for i := range iterations {
		s := createSession(t, c, map[string]any{}) // a fresh session: nothing queued behind
		resume(t, c, s.SessionID)
		r := submit(t, c, s.SessionID, "quick", fmt.Sprintf("quick %d", i))
		if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
			t.Fatalf("iteration %d: outcome %s", i, out)
		}
		var res struct {
			Interrupted *string `json:"interrupted"`
		}
		raw, rpcErr, err := c.CallRaw(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID})
		if err != nil || rpcErr != nil {
			t.Fatalf("iteration %d: session.interrupt: %v %v", i, err, rpcErr)
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		if res.Interrupted != nil {
			wrong++
			t.Errorf("iteration %d: session.interrupt after turn.completed answered %s: it names %s, which completed", i, raw, *res.Interrupted)
		}
	}
	if wrong > 0 {
		t.Logf("%d of %d interrupts named a completed turn", wrong, iterations)
	}
}
