package journeys

// Journeys of issue 17 (scale-out on PostgreSQL): two daemons on one
// database, each on its own home, sharing a token file and a short lease
// (fixtures.Cluster). Which daemon runs a turn is decided by construction:
// work admitted while only daemon A is up is A's, and B is started after.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
)

// clusterTTL is the lease_ttl of the journeys, in seconds.
const clusterTTL = 2

// takeoverBound is how long a client of a surviving daemon may wait for the
// takeover of a dead daemon's sessions: a few lease TTLs plus room for
// -race on two shared cores. It is a bound on "within the TTL", far below
// "never" or "at the next restart".
const takeoverBound = 3*clusterTTL*time.Second + 10*time.Second

// newCluster prepares a cluster of daemons whose default model is m, with
// extra config.yaml lines and lease_ttl ttl (seconds).
func newCluster(t *testing.T, m *fixtures.FakeModel, ttl int, extra string) *fixtures.Cluster {
	t.Helper()
	return fixtures.NewCluster(t, fixtures.ClusterOptions{DSN: clusterDSN(t), LeaseTTL: ttl, Config: fixtures.FakeModelConfig(m, extra)})
}

// receiptStatus decodes the status of an admission.updated event.
func receiptStatus(e fixtures.Event) string {
	var r receipt
	json.Unmarshal(e.Payload, &r)
	return r.Status
}

// closedResolution decodes prompt.closed's prompt_id and resolution.
func closedResolution(e fixtures.Event) (promptID, resolution string) {
	var p struct {
		PromptID   string `json:"prompt_id"`
		Resolution string `json:"resolution"`
	}
	json.Unmarshal(e.Payload, &p)
	return p.PromptID, p.Resolution
}

// promptRow reads a prompt's status and resolution from the store.
func promptRow(t *testing.T, db *sqlx.DB, promptID string) (status, resolution string) {
	t.Helper()
	var st struct {
		Status     string `db:"status"`
		Resolution string `db:"resolution"`
	}
	if err := db.Get(&st, db.Rebind(`SELECT status, COALESCE(resolution, '') AS resolution FROM prompts WHERE prompt_id = ?`), promptID); err != nil {
		t.Fatalf("prompt %s: %v", promptID, err)
	}
	return st.Status, st.Resolution
}

// storedMessage is one transcript row.
type storedMessage struct {
	ID          int64  `db:"id"`
	Role        string `db:"role"`
	AdmissionID string `db:"admission_id"`
	ToolCallID  string `db:"tool_call_id"`
}

func storedMessages(t *testing.T, db *sqlx.DB, sessionID string) []storedMessage {
	t.Helper()
	var ms []storedMessage
	if err := db.Select(&ms, db.Rebind(`SELECT id, role, COALESCE(admission_id, '') AS admission_id, COALESCE(tool_call_id, '') AS tool_call_id
		FROM messages WHERE session_id = ? ORDER BY id`), sessionID); err != nil {
		t.Fatalf("messages of %s: %v", sessionID, err)
	}
	return ms
}

// runningTurns is daemon.info's running_turns.
func runningTurns(t *testing.T, c *fixtures.Client) int {
	t.Helper()
	var info struct {
		RunningTurns int `json:"running_turns"`
	}
	if err := c.Call(ctxT(t), "daemon.info", nil, &info); err != nil {
		t.Fatalf("daemon.info: %v", err)
	}
	return info.RunningTurns
}

// TestClusterCrashFencesPromptsAcrossDaemons is the seed's restart-fencing
// journey across daemons: an approval (a destructive rm) and a
// clarification are open on daemon A with followers queued behind them
// (submitted through A and through B); A is SIGKILLed. Clients connected to
// B see the takeover within the lease TTL (the asks become unknown, their
// prompts close as fenced), answers to the old prompts are refused with
// stale_generation on B, the rm never runs, and after the operator resolves
// the unknowns each follower reaches the model exactly once, in order.
func TestClusterCrashFencesPromptsAcrossDaemons(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	cwdRm := t.TempDir()
	victim, victimFile := makeVictim(t, cwdRm, "build-output")
	rmCommand := "rm -rf -- " + victim
	rm := &askSide{name: "rm", askText: "clean up the build output", callID: "call_cluster_rm",
		followers: [2]string{"rm follower one", "rm follower two"}}
	cl := &askSide{name: "clarify", askText: "set up the project for me", callID: "call_cluster_clarify",
		followers: [2]string{"clarify follower one", "clarify follower two"}}
	m.On(rm.askText,
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: rm.callID, Name: "terminal", Arguments: jsonArgs(map[string]string{"command": rmCommand})}}},
		fixtures.Reply{Text: "I removed the build output."})
	m.On(cl.askText,
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: cl.callID, Name: "clarify", Arguments: `{"question":"Which language?","choices":["go","rust"]}`}}},
		fixtures.Reply{Text: "Setting up a go project."})

	cluster := newCluster(t, m, clusterTTL, "approvals: {mode: manual, timeout: 600}\nagent: {clarify_timeout: 600}")
	a := cluster.Start(t)
	db := cluster.DB(t)
	ca := a.Dial(t)
	rm.session = createSession(t, ca, map[string]any{"cwd": cwdRm}).SessionID
	cl.session = createSession(t, ca, map[string]any{}).SessionID
	rm.ask = submit(t, ca, rm.session, "rm-ask", rm.askText)
	rm.prompt = waitPrompt(t, ca, rm.ask.AdmissionID, "approval")
	cl.ask = submit(t, ca, cl.session, "clarify-ask", cl.askText)
	cl.prompt = waitPrompt(t, ca, cl.ask.AdmissionID, "clarify")

	// B joins; its client sees A's open prompts and queues the second
	// follower of each side.
	b := cluster.Start(t)
	cb := b.Dial(t)
	for _, s := range []*askSide{rm, cl} {
		snap := resume(t, cb, s.session)
		if len(snap.Prompts) != 1 || snap.Prompts[0].PromptID != s.prompt.PromptID {
			t.Fatalf("a client of B does not see session %s's open prompt %s: %+v", s.name, s.prompt.PromptID, snap.Prompts)
		}
		for i, text := range s.followers {
			via := map[int]*fixtures.Client{0: ca, 1: cb}[i]
			r := submit(t, via, s.session, fmt.Sprintf("%s-follower-%d", s.name, i+1), text)
			if r.Status != "queued" || r.Reason != "busy" || r.Duplicate {
				t.Fatalf("follower %q (through daemon %c) receipt = %+v, want queued/busy", text, "AB"[i], r)
			}
			s.followRcpt[i] = r
		}
		rows := fixtures.Admissions(t, db, s.session)
		if len(rows) != 3 {
			t.Fatalf("session %s has %d admissions, want 3: %+v", s.name, len(rows), rows)
		}
		wantRow(t, rows[0], "started", "")
		wantRow(t, rows[1], "queued", "")
		wantRow(t, rows[2], "queued", "")
	}

	epochs := map[string]int64{}
	for _, s := range []*askSide{rm, cl} {
		if owner, o := cluster.Owner(t, s.session); owner != a {
			t.Fatalf("session %s is owned by daemon id %v, want A (boot epoch %d)", s.name, o.DaemonID, a.Desc.BootEpoch)
		} else {
			epochs[s.session] = o.LeaseEpoch
		}
	}

	killed := time.Now()
	a.SIGKILL(t)
	// B's client sees the takeover: each ask becomes unknown, each prompt
	// closes as fenced.
	for _, s := range []*askSide{rm, cl} {
		cb.WaitEvent(t, takeoverBound, func(e fixtures.Event) bool {
			return e.Type == "admission.updated" && e.AdmissionID == s.ask.AdmissionID && receiptStatus(e) == "unknown"
		})
		cb.WaitEvent(t, takeoverBound, func(e fixtures.Event) bool {
			id, res := closedResolution(e)
			return e.Type == "prompt.closed" && id == s.prompt.PromptID && res == "fenced"
		})
	}
	t.Logf("takeover seen by a client of B %v after the SIGKILL of A (lease_ttl %d s)", time.Since(killed).Round(time.Millisecond), clusterTTL)
	for _, s := range []*askSide{rm, cl} {
		if o := cluster.WaitOwner(t, wait, s.session, b); o.LeaseEpoch <= epochs[s.session] {
			t.Fatalf("session %s taken over by B under lease_epoch %d, not above A's %d", s.name, o.LeaseEpoch, epochs[s.session])
		}
	}
	for _, p := range []prompt{rm.prompt, cl.prompt} {
		if st, res := promptRow(t, db, p.PromptID); st != "closed" || res != "fenced" {
			t.Fatalf("prompt %s is %s/%s in the store, want closed/fenced", p.PromptID, st, res)
		}
	}
	staleAnswers := func(c *fixtures.Client, when string) {
		t.Helper()
		if _, err := answerApproval(t, c, rm.session, rm.prompt, "once"); err == nil {
			t.Fatalf("%s: approving the old rm prompt was accepted", when)
		} else {
			wantReason(t, err, -32000, "stale_generation")
		}
		if _, err := answerClarify(t, c, cl.session, cl.prompt, "go"); err == nil {
			t.Fatalf("%s: answering the old clarify prompt was accepted", when)
		} else {
			wantReason(t, err, -32000, "stale_generation")
		}
	}
	staleAnswers(cb, "after the takeover")
	for _, s := range []*askSide{rm, cl} {
		snap := resume(t, cb, s.session)
		if len(snap.Prompts) != 0 {
			t.Fatalf("session %s lists prompts of a dead execution: %+v", s.name, snap.Prompts)
		}
		p := snap.Pending
		if len(p) != 3 || p[0].AdmissionID != s.ask.AdmissionID || p[0].Status != "unknown" {
			t.Fatalf("session %s pending = %+v, want the unknown ask and two followers", s.name, p)
		}
		for i := range 2 {
			if p[i+1].AdmissionID != s.followRcpt[i].AdmissionID || p[i+1].Status != "queued" || p[i+1].Reason != "unknown" {
				t.Fatalf("session %s pending[%d] = %+v, want follower %s queued (reason unknown)", s.name, i+1, p[i+1], s.followRcpt[i].AdmissionID)
			}
		}
	}

	// Resolve rm only: its followers run on B; clarify's still wait.
	resolveUnknownAdmission(t, cb, rm.session, rm.ask.AdmissionID, rm.prompt.ExecutionGeneration)
	waitAllTerminal(t, db, rm.session)
	rows := fixtures.Admissions(t, db, cl.session)
	wantRow(t, rows[0], "unknown", "")
	wantRow(t, rows[1], "queued", "")
	wantRow(t, rows[2], "queued", "")
	for _, f := range cl.followers {
		if n := len(m.RequestsWithLastUser(f)); n != 0 {
			t.Fatalf("follower %q ran behind an unknown admission (%d model requests)", f, n)
		}
	}
	resolveUnknownAdmission(t, cb, cl.session, cl.ask.AdmissionID, cl.prompt.ExecutionGeneration)
	for _, s := range []*askSide{rm, cl} {
		rows := waitAllTerminal(t, db, s.session)
		wantRow(t, rows[0], "terminal", "interrupted")
		wantRow(t, rows[1], "terminal", "completed")
		wantRow(t, rows[2], "terminal", "completed")
	}
	staleAnswers(b.Dial(t), "after the followers ran")

	for _, s := range []*askSide{rm, cl} {
		if n := len(m.RequestsWithLastUser(s.askText)); n != 1 {
			t.Fatalf("ask %s reached the model %d times, want exactly once", s.name, n)
		}
		i1, i2 := requestIndexes(m, s.followers[0]), requestIndexes(m, s.followers[1])
		if len(i1) != 1 || len(i2) != 1 || i1[0] > i2[0] {
			t.Fatalf("session %s followers reached the model at %v and %v, want once each, in order", s.name, i1, i2)
		}
		first := m.Requests()[i1[0]]
		if !slices.Equal(first.UserTexts, []string{s.askText, s.followers[0]}) {
			t.Fatalf("first follower of %s sent user texts %q", s.name, first.UserTexts)
		}
		notRun := 0
		for _, msg := range first.Messages {
			content, _ := msg.Content.(string)
			if msg.Role == "tool" && msg.ToolCallID == s.callID {
				if !strings.HasPrefix(content, "not run") {
					t.Fatalf("session %s: call %s has a real result %q", s.name, s.callID, content)
				}
				notRun++
			}
		}
		if notRun != 1 {
			t.Fatalf("first follower of %s: %d results for the lost call %s, want one \"not run\"", s.name, notRun, s.callID)
		}
	}
	wantIntact(t, victimFile)
}

// TestClusterGracefulStopHandsOver: SIGTERM to daemon A while a turn of
// its runs (held in the model) and two followers wait: the turn settles
// interrupted, and the followers run on B by themselves, at once. The lease
// TTL is longer than the journey's deadline, so only a handover (never a
// lease expiry) can move the queue.
func TestClusterGracefulStopHandsOver(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	held := fixtures.NewGate() // never released: the turn is in the model when A stops
	m.On("a long answer", fixtures.Reply{Text: "never", Gate: held})
	cluster := newCluster(t, m, 120, "")
	a := cluster.Start(t)
	db := cluster.DB(t)
	ca := a.Dial(t)
	s := createSession(t, ca, map[string]any{}).SessionID
	long := submit(t, ca, s, "long", "a long answer")
	waitParked(t, held, "the long turn")
	b := cluster.Start(t)
	cb := b.Dial(t)
	resume(t, cb, s)
	f1 := submit(t, ca, s, "f1", "follower one")
	f2 := submit(t, cb, s, "f2", "follower two")
	for _, r := range []receipt{f1, f2} {
		if r.Status != "queued" || r.Reason != "busy" {
			t.Fatalf("follower receipt %+v, want queued/busy", r)
		}
	}
	if owner, o := cluster.Owner(t, s); owner != a {
		t.Fatalf("the session is owned by daemon id %v, want A (boot epoch %d)", o.DaemonID, a.Desc.BootEpoch)
	}
	if code := a.SIGTERM(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d, want 0", code)
	}
	rows := fixtures.Admissions(t, db, s)
	wantRow(t, rows[0], "terminal", "interrupted")
	if out := waitTurn(t, cb, long.AdmissionID); out != "interrupted" {
		t.Fatalf("B's client saw the long turn end %s, want interrupted", out)
	}
	// The queue resumes on B by itself: no operator, no lease expiry.
	for _, r := range []receipt{f1, f2} {
		if out := waitTurn(t, cb, r.AdmissionID); out != "completed" {
			t.Fatalf("follower %s: %s", r.InputID, out)
		}
	}
	if owner, o := cluster.Owner(t, s); owner == a || (o.DaemonID.Valid && owner != b) {
		t.Fatalf("after the handover the session is owned by daemon id %v, want B (boot epoch %d) or nobody", o.DaemonID, b.Desc.BootEpoch)
	}
	rows = waitAllTerminal(t, db, s)
	wantRow(t, rows[1], "terminal", "completed")
	wantRow(t, rows[2], "terminal", "completed")
	if n := len(m.RequestsWithLastUser("a long answer")); n != 1 {
		t.Fatalf("the interrupted turn reached the model %d times", n)
	}
	i1, i2 := requestIndexes(m, "follower one"), requestIndexes(m, "follower two")
	if len(i1) != 1 || len(i2) != 1 || i1[0] > i2[0] {
		t.Fatalf("followers reached the model at %v and %v, want once each, in order", i1, i2)
	}
	if got := m.Requests()[i2[0]].UserTexts; !slices.Equal(got, []string{"a long answer", "follower one", "follower two"}) {
		t.Fatalf("second follower sent %q", got)
	}
	// Nothing is left unknown: a graceful stop is not a crash.
	for _, r := range rows {
		if r.Status == "unknown" {
			t.Fatalf("%s is unknown after a graceful handover", r.AdmissionID)
		}
	}
}

// TestClusterSplitBrainFencesThePausedDaemon: daemon A is SIGSTOPped past
// its lease while a command of its runs; B takes the session over (the
// admission becomes unknown on B's clients); A is SIGCONTed. A writes
// nothing more (no event, no transcript row, no settle after the takeover:
// every write is refused by the epoch), its command is killed, and after
// the operator resolves the unknown the follower runs once; the command
// started once and never finished.
func TestClusterSplitBrainFencesThePausedDaemon(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	cmd := `echo started >> started; sleep 300 & wait; echo finished > finished`
	m.On("run the long command",
		fixtures.Reply{Text: "starting", ToolCalls: []fixtures.FakeToolCall{{ID: "call_split", Name: "terminal", Arguments: jsonArgs(map[string]string{"command": cmd})}}},
		fixtures.Reply{Text: "the command finished"})
	cluster := newCluster(t, m, clusterTTL, "")
	a := cluster.Start(t)
	db := cluster.DB(t)
	ca := a.Dial(t)
	s := createSession(t, ca, map[string]any{"cwd": dir}).SessionID
	long := submit(t, ca, s, "long", "run the long command")
	follower := submit(t, ca, s, "after", "after the split")
	var pgid int
	fixtures.Eventually(t, wait, "the command to start its sleep", func() bool {
		if !trExists(filepath.Join(dir, "started")) {
			return false
		}
		_, _, pgid = hostProcIn(dir, "sleep\x00300\x00")
		return pgid > 0
	})
	b := cluster.Start(t)
	cb := b.Dial(t)
	resume(t, cb, s)

	owner, before := cluster.Owner(t, s)
	if owner != a {
		t.Fatalf("the session is owned by daemon id %v, want A (boot epoch %d)", before.DaemonID, a.Desc.BootEpoch)
	}
	paused := time.Now()
	a.SIGSTOP(t)
	cb.WaitEvent(t, takeoverBound, func(e fixtures.Event) bool {
		return e.Type == "admission.updated" && e.AdmissionID == long.AdmissionID && receiptStatus(e) == "unknown"
	})
	t.Logf("B took the session over %v after A was paused (lease_ttl %d s)", time.Since(paused).Round(time.Millisecond), clusterTTL)
	taken := cluster.WaitOwner(t, wait, s, b)
	if taken.LeaseEpoch <= before.LeaseEpoch {
		t.Fatalf("B took the session under lease_epoch %d, not above A's %d", taken.LeaseEpoch, before.LeaseEpoch)
	}
	eventsAtTakeover := storedEventsAfter(t, db, s, 0)
	lastSeq := eventsAtTakeover[len(eventsAtTakeover)-1].Seq
	msgsAtTakeover := storedMessages(t, db, s)
	rowAtTakeover := admissionRow(t, fixtures.Admissions(t, db, s), long.AdmissionID)

	a.SIGCONT(t)
	// A finds out it lost the lease: its command is killed and its turn
	// ends (running_turns 0) without a write.
	fixtures.Eventually(t, wait, fmt.Sprintf("the command's process group %d to be killed", pgid), func() bool {
		return len(procGroupAlive(pgid)) == 0
	})
	ca2 := a.Dial(t)
	fixtures.Eventually(t, wait, "daemon A to end its fenced turn", func() bool { return runningTurns(t, ca2) == 0 })
	if trExists(filepath.Join(dir, "finished")) {
		t.Fatal("the command of the paused daemon ran to its end")
	}
	for _, e := range storedEventsAfter(t, db, s, lastSeq) {
		t.Errorf("event written after the takeover (before any decision): %v", e)
	}
	for _, msg := range storedMessages(t, db, s) {
		if msg.ID > msgsAtTakeover[len(msgsAtTakeover)-1].ID {
			t.Errorf("transcript row written after the takeover: %+v", msg)
		}
	}
	if row := admissionRow(t, fixtures.Admissions(t, db, s), long.AdmissionID); row != rowAtTakeover || row.Status != "unknown" {
		t.Fatalf("the fenced admission is %+v after A resumed, want it as B left it: %+v", row, rowAtTakeover)
	}
	if owner, o := cluster.Owner(t, s); owner != b || o.LeaseEpoch != taken.LeaseEpoch {
		t.Errorf("after A resumed the session is owned by daemon id %v under lease epoch %d, want B's %d", o.DaemonID, o.LeaseEpoch, taken.LeaseEpoch)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The operator decides; the follower runs once, wherever.
	resolveUnknownAdmission(t, cb, s, long.AdmissionID, rowAtTakeover.ExecutionGeneration.Int64)
	rows := waitAllTerminal(t, db, s)
	wantRow(t, rows[0], "terminal", "interrupted")
	wantRow(t, admissionRow(t, rows, follower.AdmissionID), "terminal", "completed")
	if n := len(m.RequestsWithLastUser("run the long command")); n != 1 {
		t.Fatalf("the long input reached the model %d times, want once", n)
	}
	if n := len(m.RequestsWithLastUser("after the split")); n != 1 {
		t.Fatalf("the follower reached the model %d times, want once", n)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "started")); string(b) != "started\n" {
		t.Fatalf("the command started %d times, want once", strings.Count(string(b), "started"))
	}
	results := 0
	for _, msg := range m.RequestsWithLastUser("after the split")[0].Messages {
		if msg.Role == "tool" && msg.ToolCallID == "call_split" {
			results++
		}
	}
	if results != 1 {
		t.Fatalf("the follower's request carries %d results for the split call, want 1", results)
	}
}

// TestClusterConcurrentSubmitsKeepOneFIFO: clients of daemon A and of
// daemon B submit to one session at the same time. The session keeps one
// FIFO: seqs 1..N without gaps, each input admitted once and reaching the
// model exactly once, in seq order, each request carrying every earlier
// input (one transcript).
func TestClusterConcurrentSubmitsKeepOneFIFO(t *testing.T) {
	const perClient = 6
	m := fixtures.NewFakeModel(t)
	m.Default(fixtures.Reply{Text: "fine", Delay: 2 * time.Millisecond})
	cluster := newCluster(t, m, clusterTTL, "")
	a, b := cluster.Start(t), cluster.Start(t)
	db := cluster.DB(t)
	s := createSession(t, a.Dial(t), map[string]any{}).SessionID
	clients := []*fixtures.Client{a.Dial(t), a.Dial(t), b.Dial(t), b.Dial(t)}
	var mu sync.Mutex
	receipts := map[string]receipt{}
	var wg sync.WaitGroup
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := range perClient {
				input := fmt.Sprintf("c%d-%d", ci, i)
				var r receipt
				if err := atkCall(c, "prompt.submit", map[string]any{"session_id": s, "input_id": input, "text": "input " + input}, &r); err != nil {
					t.Errorf("client %d submit %s: %v", ci, input, err)
					return
				}
				if r.Seq <= last {
					t.Errorf("client %d: %s got seq %d after %d", ci, input, r.Seq, last)
				}
				last = r.Seq
				mu.Lock()
				receipts[input] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	rows := waitAllTerminal(t, db, s)
	n := len(clients) * perClient
	if len(rows) != n {
		t.Fatalf("%d admissions, want %d", len(rows), n)
	}
	var texts []string
	for i, r := range rows {
		if r.Seq != int64(i+1) {
			t.Fatalf("admission %d has seq %d: the FIFO has a gap or a duplicate", i, r.Seq)
		}
		wantRow(t, r, "terminal", "completed")
		if rc := receipts[r.InputID]; rc.AdmissionID != r.AdmissionID || rc.Seq != r.Seq {
			t.Fatalf("row %+v does not match its receipt %+v", r, rc)
		}
		texts = append(texts, "input "+r.InputID)
	}
	// The model saw the inputs once each, in seq order, each request
	// carrying all earlier inputs.
	var order []string
	for _, req := range m.Requests() {
		order = append(order, req.LastUserText())
	}
	if !slices.Equal(order, texts) {
		t.Fatalf("the model saw the inputs in the order\n%q\nwant the seq order\n%q", order, texts)
	}
	for i, req := range m.Requests() {
		if !slices.Equal(req.UserTexts, texts[:i+1]) {
			t.Fatalf("request %d carries user texts %q, want %q", i, req.UserTexts, texts[:i+1])
		}
	}
}

// TestClusterSubscriberSeesEventsOfAnotherDaemon: a client of daemon B
// subscribed to a session whose turn runs on daemon A receives the turn's
// durable events in seq order, each once, exactly as the store holds them;
// session.resume with after_seq on B replays exactly the stored events
// after it.
func TestClusterSubscriberSeesEventsOfAnotherDaemon(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	g := fixtures.NewGate()
	m.On("first on A",
		fixtures.Reply{Text: "let me look", Gate: g, ToolCalls: []fixtures.FakeToolCall{{ID: "call_ls", Name: "terminal", Arguments: `{"command":"ls"}`}}},
		fixtures.Reply{Text: "there is nothing here"})
	cluster := newCluster(t, m, clusterTTL, "approvals: {mode: off}")
	a := cluster.Start(t)
	db := cluster.DB(t)
	ca := a.Dial(t)
	s := createSession(t, ca, map[string]any{}).SessionID
	first := submit(t, ca, s, "first", "first on A")
	waitParked(t, g, "the first turn")
	if owner, o := cluster.Owner(t, s); owner != a {
		t.Fatalf("the session is owned by daemon id %v, want A (boot epoch %d)", o.DaemonID, a.Desc.BootEpoch)
	}
	b := cluster.Start(t)
	cb := b.Dial(t)
	snap := resume(t, cb, s)
	g.Release()
	if out := waitTurn(t, cb, first.AdmissionID); out != "completed" {
		t.Fatalf("B's client saw the first turn end %s", out)
	}
	second := submit(t, cb, s, "second", "second through B")
	if out := waitTurn(t, cb, second.AdmissionID); out != "completed" {
		t.Fatalf("second turn: %s", out)
	}
	want := storedEventsAfter(t, db, s, snap.LastSeq)
	sameEvents(t, "B's subscriber", durableEvents(cb.Events(), s), want)
	types := map[string]bool{}
	for _, e := range want {
		types[e.Type] = true
	}
	for _, typ := range []string{"message.completed", "tool.started", "tool.completed", "turn.completed"} {
		if !types[typ] {
			t.Fatalf("the first turn on A produced no %s event seen on B: %v", typ, want)
		}
	}
	// Replays on a fresh client of B, from 0 and from the middle.
	cb2 := b.Dial(t)
	for _, after := range []int64{0, snap.LastSeq, want[len(want)/2].Seq} {
		got := resumeAfter(t, cb2, s, after)
		if got.SnapshotRequired {
			t.Fatalf("after_seq %d: snapshot_required", after)
		}
		sameEvents(t, fmt.Sprintf("replay after %d on B", after), got.Events, storedEventsAfter(t, db, s, after))
	}
}
