package journeys

// Journeys of input delivery while a turn runs, queue edits and fork
// (issue 25; PROTOCOL.md sections 10.2 and 10.3) against the real binary:
// what the fake model received, the store's rows, through SIGKILL and
// restarts. Helpers are prefixed "st".

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
)

type stReceipt struct {
	receipt
	Delivery    string `json:"delivery"`
	SteeredInto string `json:"steered_into"`
}

// stSubmit submits with when_busy and returns the receipt or the error.
func stSubmit(t *testing.T, c *fixtures.Client, sessionID, inputID, text, whenBusy string) (stReceipt, error) {
	t.Helper()
	var r stReceipt
	p := map[string]any{"session_id": sessionID, "input_id": inputID, "text": text}
	if whenBusy != "" {
		p["when_busy"] = whenBusy
	}
	err := c.Call(ctxT(t), "prompt.submit", p, &r)
	return r, err
}

func stMustSubmit(t *testing.T, c *fixtures.Client, sessionID, inputID, text, whenBusy string) stReceipt {
	t.Helper()
	r, err := stSubmit(t, c, sessionID, inputID, text, whenBusy)
	if err != nil {
		t.Fatalf("prompt.submit %s (when_busy %q): %v", inputID, whenBusy, err)
	}
	return r
}

// stRow is an admission row with the delivery columns.
type stRow struct {
	AdmissionID string  `db:"admission_id"`
	InputID     string  `db:"request_id"`
	Status      string  `db:"status"`
	Outcome     *string `db:"outcome"`
	Gen         *int64  `db:"execution_generation"`
	Text        string  `db:"text"`
	Delivery    string  `db:"delivery"`
	SteeredInto *string `db:"steered_into"`
	StartedAt   *string `db:"started_at"`
}

func stRowOf(t *testing.T, db *sqlx.DB, admissionID string) stRow {
	t.Helper()
	var r stRow
	if err := db.Get(&r, db.Rebind(`SELECT admission_id, request_id, status, outcome, execution_generation, text, delivery,
		steered_into, started_at FROM session_admissions WHERE admission_id = ?`), admissionID); err != nil {
		t.Fatalf("row %s: %v", admissionID, err)
	}
	return r
}

func stWantRow(t *testing.T, r stRow, status, outcome, steeredInto string) {
	t.Helper()
	o, s := "", ""
	if r.Outcome != nil {
		o = *r.Outcome
	}
	if r.SteeredInto != nil {
		s = *r.SteeredInto
	}
	if r.Status != status || o != outcome || s != steeredInto {
		t.Fatalf("admission %s (%s) is %s/%s steered_into %q, want %s/%s steered_into %q", r.AdmissionID, r.InputID, r.Status, o, s, status, outcome, steeredInto)
	}
}

// stWaitCmd is a command that writes started, then runs until the file go
// exists (the test creates it).
const stWaitCmd = `echo started > started; while [ ! -e go ]; do sleep 0.05; done; echo done`

// stLastUser counts the requests whose last user message is text: how many
// times the model was asked about it as new input.
func stLastUser(m *fixtures.FakeModel, text string) int { return len(m.RequestsWithLastUser(text)) }

// stUserCount counts text among the user messages of one request.
func stUserCount(r fixtures.RecordedRequest, text string) int {
	n := 0
	for _, u := range r.UserTexts {
		if u == text {
			n++
		}
	}
	return n
}

// TestSteerMidToolCall: a steer submitted while a command runs is handed
// to the turn at its next model request, once, as the user message after
// the tool result; it settles completed with steered_into the turn.
func TestSteerMidToolCall(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	m.On("build it", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_wait", stWaitCmd)}})
	m.On("also check the tests", fixtures.Reply{Text: "built and tested"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	a := stMustSubmit(t, c, s.SessionID, "a", "build it", "")
	fixtures.Eventually(t, wait, "the command to start", func() bool { return trExists(filepath.Join(dir, "started")) })
	st := stMustSubmit(t, c, s.SessionID, "steer", "also check the tests", "steer")
	if st.Delivery != "steer" || st.Status != "queued" {
		t.Fatalf("steer receipt %+v, want queued with delivery steer", st)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, e := trTurnEnd(t, c, a.AdmissionID); out != "completed" {
		t.Fatalf("turn %s (%s)", out, e)
	}
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	stWantRow(t, stRowOf(t, db, a.AdmissionID), "terminal", "completed", "")
	stWantRow(t, stRowOf(t, db, st.AdmissionID), "terminal", "completed", a.AdmissionID)
	reqs := m.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (the tool call, then the answer)", len(reqs))
	}
	trValid(t, reqs[1])
	if got := trRoles(reqs[1]); got != "system,user,assistant,tool,user" {
		t.Fatalf("second request roles %s, want the steer as the user message after the tool result", got)
	}
	if !slices.Equal(reqs[1].UserTexts, []string{"build it", "also check the tests"}) {
		t.Fatalf("user texts %v", reqs[1].UserTexts)
	}
	if n := stLastUser(m, "also check the tests"); n != 1 || stUserCount(reqs[0], "also check the tests") != 0 {
		t.Fatalf("the steer reached the model as new input %d times", n)
	}
	// The transcript holds it once, under its own admission, after the
	// tool result.
	snap := resume(t, c, s.SessionID)
	var roles []string
	for _, msg := range snap.Messages {
		roles = append(roles, msg.Role)
		if msg.Role == "user" && msg.Content == "also check the tests" && msg.AdmissionID != st.AdmissionID {
			t.Fatalf("steer message under admission %s", msg.AdmissionID)
		}
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,user,assistant" {
		t.Fatalf("transcript roles %s", got)
	}
	if len(snap.Pending) != 0 || snap.Running != nil {
		t.Fatalf("pending %+v running %v after the turn", snap.Pending, snap.Running)
	}
}

// TestSteerAfterTurnEndedRunsNext: a steer that arrives while the turn's
// last model request is in flight is not taken; it runs as the next turn,
// ahead of an input queued before it.
func TestSteerAfterTurnEndedRunsNext(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	g := fixtures.NewGate()
	m.On("first", fixtures.Reply{Text: "first done", Gate: g})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	a := stMustSubmit(t, c, s.SessionID, "a", "first", "")
	waitParked(t, g, "the turn's final model request")
	q := stMustSubmit(t, c, s.SessionID, "q", "queued before", "queue")
	st := stMustSubmit(t, c, s.SessionID, "steer", "steered late", "steer")
	if st.Delivery != "steer" || q.Delivery != "queue" {
		t.Fatalf("deliveries %q %q", q.Delivery, st.Delivery)
	}
	// The snapshot lists the queue in the order it will run.
	snap := resume(t, c, s.SessionID)
	var ids []string
	for _, p := range snap.Pending {
		ids = append(ids, p.AdmissionID)
	}
	if !slices.Equal(ids, []string{a.AdmissionID, st.AdmissionID, q.AdmissionID}) {
		t.Fatalf("pending %v, want the turn, the steer, then the queued input", ids)
	}
	g.Release()
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	waitAllTerminal(t, db, s.SessionID)
	stWantRow(t, stRowOf(t, db, st.AdmissionID), "terminal", "completed", "")
	ra, rs, rq := stRowOf(t, db, a.AdmissionID), stRowOf(t, db, st.AdmissionID), stRowOf(t, db, q.AdmissionID)
	if !(*ra.Gen < *rs.Gen && *rs.Gen < *rq.Gen) {
		t.Fatalf("generations first %d, steer %d, queued %d: the steer must run next", *ra.Gen, *rs.Gen, *rq.Gen)
	}
	if n := stLastUser(m, "steered late"); n != 1 {
		t.Fatalf("the steer reached the model %d times as new input", n)
	}
	if r := m.RequestsWithLastUser("steered late")[0]; !slices.Equal(r.UserTexts, []string{"first", "steered late"}) {
		t.Fatalf("user texts %v", r.UserTexts)
	}
}

// TestSteerTakenThenSIGKILL: a steer taken into a turn that is lost to a
// crash is unknown with it; resolving the turn closes both, and the steer
// is never sent again.
func TestSteerTakenThenSIGKILL(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	g := fixtures.NewGate()
	m.On("build it", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_wait", stWaitCmd)}})
	m.On("and the docs", fixtures.Reply{Text: "never", Gate: g})
	m.On("after the crash", fixtures.Reply{Text: "ok"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	a := stMustSubmit(t, c, s.SessionID, "a", "build it", "")
	fixtures.Eventually(t, wait, "the command to start", func() bool { return trExists(filepath.Join(dir, "started")) })
	st := stMustSubmit(t, c, s.SessionID, "steer", "and the docs", "steer")
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitParked(t, g, "the request with the steer")
	d.SIGKILL(t)
	d.Restart(t)
	c = d.Dial(t)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	ra := stRowOf(t, db, a.AdmissionID)
	stWantRow(t, ra, "unknown", "", "")
	stWantRow(t, stRowOf(t, db, st.AdmissionID), "unknown", "", a.AdmissionID)
	snap := resume(t, c, s.SessionID)
	if snap.Running != nil {
		t.Fatalf("running %v after the crash", *snap.Running)
	}
	// Resolving names the turn; the steer taken into it closes with it.
	resolveUnknownAdmission(t, c, s.SessionID, a.AdmissionID, *ra.Gen)
	stWantRow(t, stRowOf(t, db, a.AdmissionID), "terminal", "interrupted", "")
	stWantRow(t, stRowOf(t, db, st.AdmissionID), "terminal", "interrupted", a.AdmissionID)
	n := stMustSubmit(t, c, s.SessionID, "n", "after the crash", "")
	if out, e := trTurnEnd(t, c, n.AdmissionID); out != "completed" {
		t.Fatalf("next turn %s (%s)", out, e)
	}
	if k := stLastUser(m, "and the docs"); k != 1 {
		t.Fatalf("the steer reached the model %d times as new input, want once (before the crash)", k)
	}
	r := m.RequestsWithLastUser("after the crash")[0]
	trValid(t, r)
	if stUserCount(r, "and the docs") != 1 {
		t.Fatalf("the next request has the steer %d times in its history: %v", stUserCount(r, "and the docs"), r.UserTexts)
	}
}

// TestWhenBusyInterruptAndReject: interrupt stops the running turn and
// runs the input next, ahead of the queue; reject refuses with
// session_busy and stores nothing; an idle session accepts both.
func TestWhenBusyInterruptAndReject(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	m.On("run forever", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_wait", stWaitCmd)}})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	a := stMustSubmit(t, c, s.SessionID, "a", "run forever", "")
	fixtures.Eventually(t, wait, "the command to start", func() bool { return trExists(filepath.Join(dir, "started")) })
	_, err := stSubmit(t, c, s.SessionID, "r", "not now", "reject")
	wantReason(t, err, -32000, "session_busy")
	q := stMustSubmit(t, c, s.SessionID, "q", "queued", "")
	i := stMustSubmit(t, c, s.SessionID, "i", "stop and do this", "interrupt")
	if i.Delivery != "interrupt" {
		t.Fatalf("interrupt receipt %+v", i)
	}
	if out, _ := trTurnEnd(t, c, a.AdmissionID); out != "interrupted" {
		t.Fatalf("the running turn %s, want interrupted", out)
	}
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	waitAllTerminal(t, db, s.SessionID)
	ri, rq := stRowOf(t, db, i.AdmissionID), stRowOf(t, db, q.AdmissionID)
	stWantRow(t, ri, "terminal", "completed", "")
	if *ri.Gen >= *rq.Gen {
		t.Fatalf("generations: interrupt input %d, queued %d: the interrupt input must run next", *ri.Gen, *rq.Gen)
	}
	var n int
	if err := db.Get(&n, db.Rebind(`SELECT count(*) FROM session_admissions WHERE request_id = ?`), "r"); err != nil || n != 0 {
		t.Fatalf("a rejected input was stored (%d rows, %v)", n, err)
	}
	if k := stLastUser(m, "not now"); k != 0 {
		t.Fatalf("a rejected input reached the model")
	}
	// Idle: reject admits and runs it.
	r := stMustSubmit(t, c, s.SessionID, "r", "not now", "reject")
	if r.Delivery != "queue" {
		t.Fatalf("idle reject receipt %+v", r)
	}
	if out, _ := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("idle reject input %s", out)
	}
	// Bad when_busy: invalid_params, nothing stored.
	_, err = stSubmit(t, c, s.SessionID, "bad", "x", "later")
	wantReason(t, err, -32602, "invalid_params")
}

// TestQueueEditCrashResume: prompt.update and prompt.move are durable:
// after SIGKILL and a restart the queue runs the updated text in the moved
// order; a resubmit with the original or updated text is a duplicate; an
// edit of a started input is refused not_queued.
func TestQueueEditCrashResume(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	g := fixtures.NewGate()
	m.On("hold", fixtures.Reply{Text: "never", Gate: g})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	a := stMustSubmit(t, c, s.SessionID, "a", "hold", "")
	waitParked(t, g, "the running turn")
	q1 := stMustSubmit(t, c, s.SessionID, "q1", "one", "")
	q2 := stMustSubmit(t, c, s.SessionID, "q2", "two", "")
	var up stReceipt
	if err := c.Call(ctxT(t), "prompt.update", map[string]any{"session_id": s.SessionID, "admission_id": q1.AdmissionID, "text": "one, edited"}, &up); err != nil {
		t.Fatal(err)
	}
	if up.Text != "one, edited" || up.Status != "queued" {
		t.Fatalf("update receipt %+v", up)
	}
	var mv struct {
		Order []string `json:"order"`
	}
	if err := c.Call(ctxT(t), "prompt.move", map[string]any{"session_id": s.SessionID, "admission_id": q2.AdmissionID}, &mv); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mv.Order, []string{q2.AdmissionID, q1.AdmissionID}) {
		t.Fatalf("order %v", mv.Order)
	}
	// Refusals: the running turn is not queued; an unknown admission; a
	// move before the running turn.
	err := c.Call(ctxT(t), "prompt.update", map[string]any{"session_id": s.SessionID, "admission_id": a.AdmissionID, "text": "x"}, nil)
	wantReason(t, err, -32000, "not_queued")
	err = c.Call(ctxT(t), "prompt.move", map[string]any{"session_id": s.SessionID, "admission_id": q1.AdmissionID, "before": a.AdmissionID}, nil)
	wantReason(t, err, -32000, "not_queued")
	err = c.Call(ctxT(t), "prompt.move", map[string]any{"session_id": s.SessionID, "admission_id": "adm_nope"}, nil)
	wantReason(t, err, -32000, "not_found")
	err = c.Call(ctxT(t), "prompt.update", map[string]any{"session_id": s.SessionID, "admission_id": q1.AdmissionID, "text": ""}, nil)
	wantReason(t, err, -32602, "invalid_params")

	// A steer not yet taken when the daemon dies runs first after the
	// restart, ahead of the queue.
	st := stMustSubmit(t, c, s.SessionID, "steer", "steered before the crash", "steer")

	d.SIGKILL(t)
	d.Restart(t)
	c = d.Dial(t)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	ra := stRowOf(t, db, a.AdmissionID)
	stWantRow(t, ra, "unknown", "", "")
	stWantRow(t, stRowOf(t, db, st.AdmissionID), "queued", "", "")
	if r := stRowOf(t, db, q1.AdmissionID); r.Text != "one, edited" || r.Status != "queued" {
		t.Fatalf("after the crash q1 = %+v", r)
	}
	for _, text := range []string{"one", "one, edited"} {
		dup := stMustSubmit(t, c, s.SessionID, "q1", text, "")
		if !dup.Duplicate || dup.AdmissionID != q1.AdmissionID {
			t.Fatalf("resubmit with %q: %+v, want the duplicate of %s", text, dup, q1.AdmissionID)
		}
	}
	_, err = stSubmit(t, c, s.SessionID, "q1", "one, other", "")
	wantReason(t, err, -32000, "admission_conflict")
	resolveUnknownAdmission(t, c, s.SessionID, a.AdmissionID, *ra.Gen)
	waitAllTerminal(t, db, s.SessionID)
	r1, r2, rs := stRowOf(t, db, q1.AdmissionID), stRowOf(t, db, q2.AdmissionID), stRowOf(t, db, st.AdmissionID)
	stWantRow(t, rs, "terminal", "completed", "")
	if *rs.Gen >= *r2.Gen {
		t.Fatalf("the steer ran at generation %d, q2 at %d: the steer must run first after the restart", *rs.Gen, *r2.Gen)
	}
	if *r2.Gen >= *r1.Gen {
		t.Fatalf("q2 ran at generation %d, q1 at %d: the move did not survive the restart", *r2.Gen, *r1.Gen)
	}
	if stLastUser(m, "one, edited") != 1 || stLastUser(m, "one") != 0 {
		t.Fatalf("the model got the edited text %d times and the original %d times", stLastUser(m, "one, edited"), stLastUser(m, "one"))
	}
}

// TestForkThenBothContinue: session.fork copies the transcript through a
// terminal turn into a new session with the same settings and an empty
// queue; both sessions then run turns independently.
func TestForkThenBothContinue(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	g := fixtures.NewGate()
	m.On("three", fixtures.Reply{Text: "three done", Gate: g})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	dir := t.TempDir()
	s := createSession(t, c, map[string]any{"cwd": dir, "title": "work"})
	resume(t, c, s.SessionID)
	a1 := stMustSubmit(t, c, s.SessionID, "1", "one", "")
	a2 := stMustSubmit(t, c, s.SessionID, "2", "two", "")
	trTurnEnd(t, c, a2.AdmissionID)
	a3 := stMustSubmit(t, c, s.SessionID, "3", "three", "")
	waitParked(t, g, "the third turn")
	// Through a running admission: not_terminal; unknown ids: not_found.
	err := c.Call(ctxT(t), "session.fork", map[string]any{"session_id": s.SessionID, "through_admission_id": a3.AdmissionID}, nil)
	wantReason(t, err, -32000, "not_terminal")
	err = c.Call(ctxT(t), "session.fork", map[string]any{"session_id": s.SessionID, "through_admission_id": "adm_nope"}, nil)
	wantReason(t, err, -32000, "not_found")
	err = c.Call(ctxT(t), "session.fork", map[string]any{"session_id": "ses_nope"}, nil)
	wantReason(t, err, -32000, "not_found")
	// Through an input cancelled while queued: it never ran, so it has no
	// turn to fork through (an empty fork would drop the turns before it).
	cx := stMustSubmit(t, c, s.SessionID, "cx", "never mind", "")
	if err := c.Call(ctxT(t), "prompt.cancel", map[string]any{"session_id": s.SessionID, "admission_id": cx.AdmissionID}, nil); err != nil {
		t.Fatal(err)
	}
	err = c.Call(ctxT(t), "session.fork", map[string]any{"session_id": s.SessionID, "through_admission_id": cx.AdmissionID}, nil)
	wantReason(t, err, -32602, "invalid_params")
	var f struct {
		SessionID string `json:"session_id"`
	}
	if err := c.Call(ctxT(t), "session.fork", map[string]any{"session_id": s.SessionID, "through_admission_id": a1.AdmissionID}, &f); err != nil {
		t.Fatal(err)
	}
	fs := resume(t, c, f.SessionID)
	if fs.Cwd != dir || fs.Model != s.Model || !slices.Equal(fs.Toolsets, s.Toolsets) || len(fs.Pending) != 0 || fs.Title != "work (fork)" {
		t.Fatalf("fork snapshot %+v", fs)
	}
	var texts []string
	for _, msg := range fs.Messages {
		texts = append(texts, msg.Role+":"+msg.Content)
	}
	if !slices.Equal(texts, []string{"user:one", "assistant:ok: one"}) {
		t.Fatalf("fork transcript %v", texts)
	}
	// Without through: every terminal turn (the running one is left out).
	var f2 struct {
		SessionID string `json:"session_id"`
	}
	if err := c.Call(ctxT(t), "session.fork", map[string]any{"session_id": s.SessionID}, &f2); err != nil {
		t.Fatal(err)
	}
	if n := len(resume(t, c, f2.SessionID).Messages); n != 4 {
		t.Fatalf("fork of every terminal turn has %d messages, want 4", n)
	}
	g.Release()
	trTurnEnd(t, c, a3.AdmissionID)
	fa := stMustSubmit(t, c, f.SessionID, "f", "in the fork", "")
	sa := stMustSubmit(t, c, s.SessionID, "4", "in the source", "")
	trTurnEnd(t, c, fa.AdmissionID)
	trTurnEnd(t, c, sa.AdmissionID)
	rf := m.RequestsWithLastUser("in the fork")[0]
	rs := m.RequestsWithLastUser("in the source")[0]
	trValid(t, rf)
	if !slices.Equal(rf.UserTexts, []string{"one", "in the fork"}) {
		t.Fatalf("fork request user texts %v", rf.UserTexts)
	}
	if !slices.Equal(rs.UserTexts, []string{"one", "two", "three", "in the source"}) {
		t.Fatalf("source request user texts %v", rs.UserTexts)
	}
}

// TestClusterMoveThenTakeover: on two daemons sharing PostgreSQL, a queue
// reordered and edited through daemon B while daemon A runs the session's
// turn keeps that order and text when A is SIGKILLed and B takes the
// session over; a steer admitted through B and not yet taken runs first.
func TestClusterMoveThenTakeover(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	held := fixtures.NewGate() // never released: the turn is in the model when A dies
	m.On("a long answer", fixtures.Reply{Text: "never", Gate: held})
	cluster := newCluster(t, m, clusterTTL, "")
	a := cluster.Start(t)
	db := cluster.DB(t)
	ca := a.Dial(t)
	s := createSession(t, ca, map[string]any{}).SessionID
	long := submit(t, ca, s, "long", "a long answer")
	waitParked(t, held, "the long turn")
	q1 := stMustSubmit(t, ca, s, "q1", "one", "")
	q2 := stMustSubmit(t, ca, s, "q2", "two", "")
	q3 := stMustSubmit(t, ca, s, "q3", "three", "")
	b := cluster.Start(t)
	cb := b.Dial(t)
	resume(t, cb, s)
	var mv struct {
		Order []string `json:"order"`
	}
	if err := cb.Call(ctxT(t), "prompt.move", map[string]any{"session_id": s, "admission_id": q3.AdmissionID, "before": q1.AdmissionID}, &mv); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mv.Order, []string{q3.AdmissionID, q1.AdmissionID, q2.AdmissionID}) {
		t.Fatalf("order %v", mv.Order)
	}
	if err := cb.Call(ctxT(t), "prompt.update", map[string]any{"session_id": s, "admission_id": q2.AdmissionID, "text": "two, edited"}, nil); err != nil {
		t.Fatal(err)
	}
	st := stMustSubmit(t, cb, s, "steer", "steered through B", "steer")
	if st.Delivery != "steer" {
		t.Fatalf("steer receipt %+v", st)
	}
	if owner, _ := cluster.Owner(t, s); owner != a {
		t.Fatal("the session is not A's")
	}
	a.SIGKILL(t)
	// B takes the session over within the lease; the turn is unknown.
	var ra stRow
	fixtures.Eventually(t, takeoverBound, "B to take the session and make the turn unknown", func() bool {
		ra = stRowOf(t, db, long.AdmissionID)
		return ra.Status == "unknown"
	})
	resolveUnknownAdmission(t, cb, s, long.AdmissionID, *ra.Gen)
	rows := waitAllTerminal(t, db, s)
	for _, r := range rows {
		if r.AdmissionID != long.AdmissionID {
			wantRow(t, r, "terminal", "completed")
		}
	}
	want := []string{"steered through B", "three", "one", "two, edited"}
	var at []int
	for _, text := range want {
		idx := requestIndexes(m, text)
		if len(idx) != 1 {
			t.Fatalf("%q reached the model %d times as new input, want once", text, len(idx))
		}
		at = append(at, idx[0])
	}
	if !slices.IsSorted(at) {
		t.Fatalf("the inputs reached the model at %v (for %q): the order did not survive the takeover", at, want)
	}
	if len(requestIndexes(m, "two")) != 0 {
		t.Fatal("the text before the edit reached the model")
	}
}

// TestSessionctlSteerQueueFork: `send --steer` joins the running turn and
// prints that turn's answer; `queue ls|edit|move|cancel` edit the waiting
// inputs; `fork` starts a session from the transcript; refusals are one
// "sessionctl: " line with exit 1 (2 for usage).
func TestSessionctlSteerQueueFork(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	m.On("build it", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{trTerm("call_wait", stWaitCmd)}})
	m.On("also the docs", fixtures.Reply{Text: "built, docs too"})
	held := fixtures.NewGate()
	m.On("hold", fixtures.Reply{Text: "held answer", Gate: held})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}")})
	s := newCtlSession(t, d.Home, dir)

	first := ctlStart(t, d.Home, "send", s, "build it", "--json")
	fixtures.Eventually(t, wait, "the command to start", func() bool { return trExists(filepath.Join(dir, "started")) })
	steer := ctlStart(t, d.Home, "send", s, "also the docs", "--steer", "--json")
	c := d.Dial(t)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	fixtures.Eventually(t, wait, "the steer to be admitted", func() bool {
		var n int
		db.Get(&n, `SELECT count(*) FROM session_admissions WHERE delivery = 'steer'`)
		return n == 1
	})
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	for _, p := range []*ctlProc{first, steer} {
		r := p.wait(t)
		ctlWant(t, r, 0, `"reply": "built, docs too"`)
	}
	var out struct {
		Receipt stReceipt `json:"receipt"`
	}
	if err := json.Unmarshal(steer.out.Bytes(), &out); err != nil || out.Receipt.SteeredInto == "" || out.Receipt.Outcome == nil || *out.Receipt.Outcome != "completed" {
		t.Fatalf("send --steer --json = %s (%v)", steer.out.String(), err)
	}
	ctlWant(t, ctl(t, d.Home, "", "send", s, "x", "--when-busy", "later"), 2, "--when-busy")
	ctlWant(t, ctl(t, d.Home, "", "send", s, "x", "--steer", "--when-busy", "queue"), 2, "contradict")

	// The queue: a held turn, two inputs behind it.
	resume(t, c, s)
	h := stMustSubmit(t, c, s, "h", "hold", "")
	waitParked(t, held, "the held turn")
	q1 := stMustSubmit(t, c, s, "q1", "first in line", "")
	q2 := stMustSubmit(t, c, s, "q2", "second in line", "")
	ctlWant(t, ctl(t, d.Home, "", "queue", "ls", s), 0, "1  "+q1.AdmissionID, "2  "+q2.AdmissionID, "first in line")
	ctlWant(t, ctl(t, d.Home, "", "queue", "move", s, q2.AdmissionID), 0, "1\t"+q2.AdmissionID+"\n2\t"+q1.AdmissionID)
	ctlWant(t, ctl(t, d.Home, "", "queue", "edit", s, q1.AdmissionID, "first, edited"), 0, "updated "+q1.AdmissionID)
	ctlWant(t, ctl(t, d.Home, "", "queue", "edit", s, h.AdmissionID, "too late"), 1, "no longer queued")
	ctlWant(t, ctl(t, d.Home, "", "queue", "move", s, q1.AdmissionID, "--before", h.AdmissionID), 1, "no longer queued")
	ctlWant(t, ctl(t, d.Home, "", "queue", "cancel", s, q2.AdmissionID), 0, "cancelled "+q2.AdmissionID)
	r := ctl(t, d.Home, "", "queue", "ls", s, "--json")
	ctlWant(t, r, 0)
	var ls struct {
		Queued []stReceipt `json:"queued"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || len(ls.Queued) != 1 || ls.Queued[0].Text != "first, edited" {
		t.Fatalf("queue ls --json = %s (%v)", r.stdout, err)
	}
	ctlWant(t, ctl(t, d.Home, "", "fork", s, "--through", h.AdmissionID), 1, "not terminal")
	held.Release()
	waitAllTerminal(t, db, s)

	// Fork through the first turn: the new session has its transcript.
	r = ctl(t, d.Home, "", "fork", s, "--through", stRowByInput(t, db, s, first.cmd.Args).AdmissionID)
	ctlWant(t, r, 0, "ses_")
	f := strings.TrimSpace(r.stdout)
	ctlWant(t, ctl(t, d.Home, "", "send", f, "in the fork"), 0, "ok: in the fork")
	rf := m.RequestsWithLastUser("in the fork")[0]
	if !slices.Equal(rf.UserTexts, []string{"build it", "also the docs", "in the fork"}) {
		t.Fatalf("the fork's request has user texts %v", rf.UserTexts)
	}
	trValid(t, rf)
}

// stRowByInput is the admission of the `send` whose args are given (its
// text is args' 4th after --home HOME send SESSION).
func stRowByInput(t *testing.T, db *sqlx.DB, sessionID string, args []string) stRow {
	t.Helper()
	text := args[5]
	var r stRow
	if err := db.Get(&r, db.Rebind(`SELECT admission_id, request_id, status, outcome, execution_generation, text, delivery,
		steered_into, started_at FROM session_admissions WHERE target_session_id = ? AND text = ?`), sessionID, text); err != nil {
		t.Fatalf("admission of %q: %v", text, err)
	}
	return r
}
