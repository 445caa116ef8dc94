package journeys

// A crash at every commit boundary (issue 27, PROTOCOL.md section 10.4).
// One scripted journey — two sessions, a streamed answer, a safe command,
// an approved dangerous command, a denied one, a clarification, a queued
// input cancelled, another queued input that the held turn's interrupted
// settle starts in its own commit (settle+claim), a last input to each
// session —
// is run once on a -tags faultinject build with SESSIOND_FAULT_TRACE=1 to
// count (and name) the durable write transactions of the daemon's process,
// then once per boundary, with SESSIOND_FAULT=crash-before-commit:N and
// crash-after-commit:N. Each time the daemon kills itself there; it is
// restarted on the same home (on PostgreSQL with two daemons, the other
// daemon takes the sessions over instead), the unknown admissions are
// resolved, the journey is run again from its start (every step is
// idempotent: inputs by input_id, sessions by request_id) to its end, and
// the invariants of crashpoints_check_test.go are checked.
//
// The bound in `make test` (CRASHPOINTS=all runs every boundary
// everywhere; CRASHPOINTS_ONLY=N,M replays chosen ones): every boundary
// of the counting run on SQLite, before and after — its numbering is
// deterministic up to the order of the two last submits (the journey
// waits for each step; lease_ttl is an hour, so no heartbeat commits);
// on PostgreSQL, alone and with two daemons, every 8th boundary, before
// and after. There the numbering is not deterministic: lease renewals and
// takeover scans commit every lease_ttl/3, and the bus announces events
// to the other daemons in `notify` transactions batched as they come, so
// a boundary N of the counting run may land on a neighbour; the stride
// samples every part of the journey and each run logs the transaction it
// crashed at.
// Steer (issue 25) is not in the journey yet.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/crashcheck"
)

// cpInputs is the journey: its inputs, in the order it submits them.
func cpInputs() []crashcheck.Input {
	return []crashcheck.Input{
		{ID: "stream", Session: 0, Text: "s1: stream me an answer", Want: []string{"completed"}},
		{ID: "safe", Session: 1, Text: "s2: run a safe command", Want: []string{"completed"}},
		{ID: "approved", Session: 0, Text: "s1: remove the scratch directory", Want: []string{"completed"}},
		{ID: "denied", Session: 0, Text: "s1: remove the keep directory", Want: []string{"completed"}},
		{ID: "clarify", Session: 1, Text: "s2: ask me something", Want: []string{"completed"}},
		{ID: "hold", Session: 1, Text: "s2: hold the turn", Want: []string{"interrupted"}},
		{ID: "cancel", Session: 1, Text: "s2: queued, then cancelled", Want: []string{"cancelled", "completed"}},
		{ID: "next", Session: 1, Text: "s2: queued, started by the interrupt's settle", Want: []string{"completed"}},
		{ID: "last1", Session: 0, Text: "s1: the last input", Want: []string{"completed"}},
		{ID: "last2", Session: 1, Text: "s2: the last input", Want: []string{"completed"}},
	}
}

type cpKind string

const (
	cpSQLite      cpKind = "sqlite"
	cpPostgres    cpKind = "postgres"
	cpPostgresTwo cpKind = "postgres-two-daemons"
)

// errDown says the daemon the journey talks to has died (the fault).
var errDown = errors.New("the daemon died")

// cpRun is one run of the journey on a fresh home (and database).
type cpRun struct {
	t      *testing.T
	kind   cpKind
	m      *fixtures.FakeModel
	dirs   [2]string
	inputs map[string]crashcheck.Input
	cl     *fixtures.Cluster
	dsn    string
	first  *fixtures.Daemon // the daemon started with the fault
	d      *fixtures.Daemon // the daemon the client talks to
	c      *fixtures.Client
	db     *sqlx.DB
	rec    crashcheck.Record
}

func newCPRun(t *testing.T, kind cpKind) *cpRun {
	r := &cpRun{t: t, kind: kind, m: fixtures.NewFakeModel(t), inputs: map[string]crashcheck.Input{}}
	r.rec = crashcheck.Record{Sessions: make([]string, 2), Inputs: cpInputs(), Acked: map[string]string{}, CancelAcked: map[string]bool{}, Resolved: map[string]bool{}}
	for _, in := range r.rec.Inputs {
		r.inputs[in.ID] = in
	}
	r.dirs = [2]string{t.TempDir(), t.TempDir()}
	for _, sub := range []string{"scratch", "keep"} {
		if err := os.MkdirAll(filepath.Join(r.dirs[0], sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dirs[0], sub, "file.txt"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.rec.Gated = []crashcheck.Gated{{Command: r.rmCommand("scratch")}, {Command: r.rmCommand("keep")}}
	hold := fixtures.NewGate() // never released: the turn is interrupted in the model
	r.m.DefaultFunc(func(req fixtures.RecordedRequest) fixtures.Reply {
		if req.LastIsToolResult {
			return fixtures.Reply{Text: "done"}
		}
		term := func(cmd string) fixtures.Reply {
			return fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: jsonArgs(map[string]string{"command": cmd})}}}
		}
		switch req.LastUserText() {
		case r.inputs["stream"].Text:
			return fixtures.Reply{Text: "a streamed answer, in several chunks, to the first input", ChunkDelay: time.Millisecond}
		case r.inputs["safe"].Text:
			return term("echo safe-output")
		case r.inputs["approved"].Text:
			return term(r.rmCommand("scratch"))
		case r.inputs["denied"].Text:
			return term(r.rmCommand("keep"))
		case r.inputs["clarify"].Text:
			return fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: jsonArgs(map[string]any{"question": "which colour?", "choices": []string{"blue", "red"}})}}}
		case r.inputs["hold"].Text:
			return fixtures.Reply{Text: "never sent", Gate: hold}
		}
		return fixtures.Reply{Text: "ok"}
	})
	return r
}

func (r *cpRun) rmCommand(sub string) string { return "rm -rf -- " + filepath.Join(r.dirs[0], sub) }

// extra is the config.yaml of every daemon of the run beyond the model.
func (r *cpRun) extra() string {
	s := "approvals: {mode: manual, timeout: 600}\nagent: {clarify_timeout: 600}\n"
	switch r.kind {
	case cpSQLite:
		return s + "cluster: {lease_ttl: 3600}\n"
	case cpPostgres:
		return s + fmt.Sprintf("store: {driver: postgres, dsn: %q}\ncluster: {lease_ttl: %d}\n", r.dsn, clusterTTL)
	}
	return s
}

// start starts the run's daemon (or, with two daemons, the first with the
// fault and the second without) with env; it reports whether the daemon
// with the fault became ready.
func (r *cpRun) start(env []string) bool {
	t := r.t
	bin := fixtures.BuildFaultBinary(t)
	if r.kind != cpSQLite {
		r.dsn = clusterDSN(t)
	}
	var ready bool
	if r.kind == cpPostgresTwo {
		r.cl = fixtures.NewCluster(t, fixtures.ClusterOptions{DSN: r.dsn, LeaseTTL: clusterTTL, Config: fixtures.FakeModelConfig(r.m, r.extra())})
		r.first, ready = r.cl.StartWith(t, bin, env, true)
		r.cl.StartWith(t, bin, nil, false)
	} else {
		r.first, ready = fixtures.StartDaemonMayExit(t, fixtures.DaemonOptions{Binary: bin, Env: env, Config: fixtures.FakeModelConfig(r.m, r.extra())})
	}
	r.d = r.first
	if ready {
		if err := r.dial(); err != nil {
			return false
		}
	}
	return ready
}

// dial connects the client to r.d; errDown when it is gone.
func (r *cpRun) dial() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := fixtures.DialRaw(ctx, r.d.Desc.URL, &websocket.DialOptions{
		HTTPHeader: fixtures.BearerHeader(r.d.Desc.Token), Subprotocols: []string{fixtures.Subprotocol}})
	if err != nil {
		if r.dead() {
			return errDown
		}
		r.t.Fatalf("dial %s: %v", r.d.Desc.URL, err)
	}
	if r.c != nil {
		r.c.Close()
	}
	r.c = fixtures.NewClient(r.t, conn)
	r.openStore()
	return nil
}

func (r *cpRun) openStore() {
	if r.db != nil {
		return
	}
	if r.kind == cpSQLite {
		r.db = fixtures.OpenStoreReadOnly(r.t, r.d.Home)
	} else {
		r.db = fixtures.OpenPostgresReadOnly(r.t, r.dsn)
	}
}

// dead reports whether r.d has exited (waiting a little: a call fails as
// the process dies).
func (r *cpRun) dead() bool {
	_, err := r.d.Wait(10 * time.Second)
	return err == nil
}

// call is Client.Call that turns a lost daemon into errDown and returns
// refusals (*fixtures.RPCError) to the step; any other failure fails the
// test.
func (r *cpRun) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := r.c.Call(ctx, method, params, result)
	var re *fixtures.RPCError
	if err == nil || errors.As(err, &re) {
		return err
	}
	if r.dead() {
		return errDown
	}
	r.t.Fatalf("%s: %v", method, err)
	return err
}

// rows reads the admissions of the journey's sessions and notes two
// started admissions of one session.
func (r *cpRun) rows() map[string]fixtures.AdmissionRow {
	out := map[string]fixtures.AdmissionRow{}
	for i, sid := range r.rec.Sessions {
		if sid == "" {
			continue
		}
		started := 0
		for _, row := range fixtures.Admissions(r.t, r.db, sid) {
			out[row.AdmissionID] = row
			if row.Status == "started" {
				started++
			}
		}
		if started > 1 {
			r.rec.TwoStarted = append(r.rec.TwoStarted, fmt.Sprintf("session %d at %s", i+1, time.Now().Format(time.StampMilli)))
		}
	}
	return out
}

// poll runs cond every 10 ms until it returns true or an error, the
// daemon dies (errDown) or the deadline passes (the test fails).
func (r *cpRun) poll(what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		if !r.d.Running() {
			r.dead()
			return errDown
		}
		done, err := cond()
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, crashcheck.Describe(r.record()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// submit submits input id; it returns its admission id, or "" when the
// daemon says the input was cancelled.
func (r *cpRun) submit(id string) (string, error) {
	in := r.inputs[id]
	var rc receipt
	err := r.call("prompt.submit", map[string]any{"session_id": r.rec.Sessions[in.Session], "input_id": id, "text": in.Text}, &rc)
	var re *fixtures.RPCError
	if errors.As(err, &re) && re.Reason() == "cancelled" {
		return "", nil
	} else if err != nil {
		if re != nil {
			r.t.Fatalf("prompt.submit %s: %v", id, err)
		}
		return "", err
	}
	r.rec.Acked[id] = rc.AdmissionID
	return rc.AdmissionID, nil
}

// settle waits until admission aid is terminal, answering its open
// prompts with answer (nil: none expected) and resolving it when it is
// unknown.
func (r *cpRun) settle(aid string, answer func(kind string) map[string]any) error {
	return r.poll("admission "+aid+" to settle", wait, func() (bool, error) {
		row, ok := r.rows()[aid]
		if !ok {
			return false, fmt.Errorf("admission %s has no row", aid)
		}
		switch row.Status {
		case "terminal":
			return true, nil
		case "unknown":
			return false, r.resolve(row)
		case "started":
			if answer == nil {
				return false, nil
			}
			var open []struct {
				PromptID            string `db:"prompt_id"`
				Kind                string `db:"kind"`
				ExecutionGeneration int64  `db:"execution_generation"`
				AdmissionID         string `db:"admission_id"`
			}
			if err := r.db.Select(&open, r.db.Rebind(`SELECT prompt_id, kind, execution_generation, admission_id FROM prompts
				WHERE admission_id = ? AND status = 'open'`), aid); err != nil {
				r.t.Fatalf("open prompts: %v", err)
			}
			for _, p := range open {
				params := answer(p.Kind)
				params["session_id"], params["prompt_id"], params["execution_generation"] = row.SessionID, p.PromptID, p.ExecutionGeneration
				var res respondResult
				if err := r.call(p.Kind+".respond", params, &res); err != nil && !isRefusal(err) {
					return false, err
				}
			}
		}
		return false, nil
	})
}

func isRefusal(err error) bool {
	var re *fixtures.RPCError
	return errors.As(err, &re)
}

// resolve is the operator's prompt.resolve_unknown of an unknown admission.
func (r *cpRun) resolve(row fixtures.AdmissionRow) error {
	var rc receipt
	err := r.call("prompt.resolve_unknown", map[string]any{"session_id": row.SessionID, "admission_id": row.AdmissionID,
		"execution_generation": row.ExecutionGeneration.Int64}, &rc)
	if isRefusal(err) {
		return nil // resolved meanwhile (a poll saw the row before), or not unknown any more
	} else if err != nil {
		return err
	}
	r.rec.Resolved[row.AdmissionID] = true
	return nil
}

// journey runs the script from its start; every step is idempotent, so a
// second run after a crash completes what the first left.
func (r *cpRun) journey() error {
	for i := range 2 {
		var s snapshot
		if err := r.call("session.create", map[string]any{"cwd": r.dirs[i], "request_id": fmt.Sprintf("crashpoints-session-%d", i+1)}, &s); err != nil {
			if isRefusal(err) {
				r.t.Fatalf("session.create: %v", err)
			}
			return err
		}
		r.rec.Sessions[i] = s.SessionID
	}
	steps := []struct {
		id     string
		answer func(kind string) map[string]any
	}{
		{"stream", nil},
		{"safe", nil},
		{"approved", func(string) map[string]any { return map[string]any{"choice": "once"} }},
		{"denied", func(string) map[string]any { return map[string]any{"choice": "deny"} }},
		{"clarify", func(string) map[string]any { return map[string]any{"answer": "blue"} }},
	}
	for _, s := range steps {
		aid, err := r.submit(s.id)
		if err != nil {
			return err
		}
		if err := r.settle(aid, s.answer); err != nil {
			return err
		}
	}
	if err := r.holdCancelInterrupt(); err != nil {
		return err
	}
	var last []string
	for _, id := range []string{"last1", "last2"} {
		aid, err := r.submit(id)
		if err != nil {
			return err
		}
		last = append(last, aid)
	}
	for _, aid := range last {
		if err := r.settle(aid, nil); err != nil {
			return err
		}
	}
	return nil
}

// holdCancelInterrupt: a turn held in the model, an input queued behind it
// and cancelled, another queued behind it, then the turn interrupted (its
// settle starts the other).
func (r *cpRun) holdCancelInterrupt() error {
	holdText := r.inputs["hold"].Text
	before := len(r.m.RequestsWithLastUser(holdText))
	hold, err := r.submit("hold")
	if err != nil {
		return err
	}
	var live bool
	if err := r.poll("the held turn to reach the model", wait, func() (bool, error) {
		row := r.rows()[hold]
		switch row.Status {
		case "terminal":
			return true, nil
		case "unknown":
			return false, r.resolve(row)
		}
		// The request of this start, or (after a restart that claimed it at
		// boot, before this step) the one held in the model now.
		live = row.Status == "started" && (len(r.m.RequestsWithLastUser(holdText)) > before || r.m.InFlight() > 0)
		return live, nil
	}); err != nil {
		return err
	}
	queued, err := r.submit("cancel")
	if err != nil {
		return err
	}
	if live && queued != "" {
		var rc receipt
		err := r.call("prompt.cancel", map[string]any{"session_id": r.rec.Sessions[1], "admission_id": queued}, &rc)
		if err == nil && rc.Status == "terminal" && rc.Outcome != nil && *rc.Outcome == "cancelled" {
			r.rec.CancelAcked[queued] = true
		} else if err != nil && !isRefusal(err) {
			return err
		}
	}
	// Queued behind the held turn: its interrupted settle starts this one
	// in the same commit (settle+claim, issue 28).
	next, err := r.submit("next")
	if err != nil {
		return err
	}
	if live && queued != "" {
		var ir map[string]any
		if err := r.call("session.interrupt", map[string]any{"session_id": r.rec.Sessions[1]}, &ir); err != nil && !isRefusal(err) {
			return err
		}
	}
	if err := r.settle(hold, nil); err != nil {
		return err
	}
	if queued != "" {
		if err := r.settle(queued, nil); err != nil {
			return err
		}
	}
	return r.settle(next, nil)
}

// recover brings the journey back after the fault: a restart on the same
// home (or, with two daemons, the survivor's takeover), the takeover of
// the dead process's turns (each becomes unknown) and their resolution.
func (r *cpRun) recover() {
	t := r.t
	dead := r.first.Desc.BootEpoch // the daemon that died (if it became ready: else it started nothing)
	if r.kind == cpPostgresTwo {
		r.d = r.cl.Daemon(1)
	} else {
		r.d.RestartWithEnv(t, []string{"SESSIOND_FAULT_TRACE=1"}, false)
	}
	if err := r.dial(); err != nil {
		t.Fatalf("the daemon after the fault died: %v", err)
	}
	if r.rec.Sessions[0] == "" {
		return // the fault came before the sessions existed
	}
	// On SQLite the boot made them unknown before it listened; on
	// PostgreSQL a takeover does, once the dead daemon's lease expired.
	// The new owner may already run inputs that were queued.
	err := r.poll("the dead daemon's turns to become unknown", takeoverBound, func() (bool, error) {
		for _, sid := range r.rec.Sessions {
			if sid == "" {
				continue
			}
			for _, row := range fixtures.Admissions(t, r.db, sid) {
				if row.Status == "started" && row.OwnerEpoch.Int64 == dead {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("after the fault: %v", err)
	}
	for _, row := range r.rows() {
		if row.Status == "unknown" {
			if err := r.resolve(row); err != nil {
				t.Fatalf("resolve %s: %v", row.AdmissionID, err)
			}
		}
	}
}

// record collects what the run left for crashcheck.Check.
func (r *cpRun) record() crashcheck.Record {
	rec := r.rec
	rec.Rows = nil
	for _, sid := range rec.Sessions {
		if sid != "" && r.db != nil {
			for _, row := range fixtures.Admissions(r.t, r.db, sid) {
				rec.Rows = append(rec.Rows, crashcheck.Row{AdmissionID: row.AdmissionID, SessionID: row.SessionID, InputID: row.InputID,
					Seq: row.Seq, Status: row.Status, Outcome: row.Outcome, ExecutionGeneration: row.ExecutionGeneration})
			}
		}
	}
	rec.Requests = r.m.Requests()
	rec.Gated = append([]crashcheck.Gated(nil), rec.Gated...)
	for i, sub := range []string{"scratch", "keep"} {
		_, err := os.Stat(filepath.Join(r.dirs[0], sub))
		rec.Gated[i].Ran = errors.Is(err, os.ErrNotExist)
	}
	rec.Approvals = nil
	if r.db != nil {
		var rows []struct {
			Payload  string `db:"payload"`
			Response string `db:"response"`
		}
		if err := r.db.Select(&rows, `SELECT CAST(payload AS TEXT) AS payload, COALESCE(CAST(response AS TEXT), '') AS response
			FROM prompts WHERE kind = 'approval' AND resolution = 'answered'`); err != nil {
			r.t.Fatalf("approvals: %v", err)
		}
		for _, row := range rows {
			var p struct {
				Command string `json:"command"`
			}
			json.Unmarshal([]byte(row.Payload), &p)
			rec.Approvals = append(rec.Approvals, crashcheck.Approval{Command: p.Command, Choice: cpChoice(row.Response)})
		}
	}
	return rec
}

// cpChoice reads the choice of a stored approval response ("once" or
// {"choice":"once"}).
func cpChoice(response string) string {
	for _, c := range []string{"once", "session", "always", "deny"} {
		if strings.Contains(response, `"`+c+`"`) {
			return c
		}
	}
	return ""
}

var cpCommitLine = regexp.MustCompile(`(?m)^sessiond fault: commit (\d+) \((.*)\)$`)
var cpCrashLine = regexp.MustCompile(`(?m)^sessiond fault: crash (before|after) commit (\d+) \((.*)\)$`)

// cpBoundary is one commit of the counting run.
type cpBoundary struct {
	N     int
	Label string
}

// runCrashPoint runs the journey with fault ("" for the counting run) and
// checks the invariants; it returns the commits the first daemon traced
// and the crash line it printed ("" when it did not crash).
func runCrashPoint(t *testing.T, kind cpKind, fault string) (commits []cpBoundary, crash string) {
	r := newCPRun(t, kind)
	env := []string{"SESSIOND_FAULT_TRACE=1"}
	if fault != "" {
		env = append(env, "SESSIOND_FAULT="+fault)
	}
	err := errDown
	if r.start(env) {
		err = r.journey()
	}
	switch {
	case err == nil && fault != "":
		// The boundary lies beyond this run's commits (the numbering moved
		// with heartbeats on PostgreSQL); it ran as the counting run did.
	case errors.Is(err, errDown):
		if fault == "" {
			t.Fatalf("the daemon died without a fault; stderr:\n%s", r.first.AllStderr())
		}
		r.recover()
		if err := r.journey(); err != nil {
			t.Fatalf("the journey after the fault: %v", err)
		}
	case err != nil:
		t.Fatalf("journey: %v", err)
	}
	stderr := r.first.AllStderr()
	if m := cpCrashLine.FindStringSubmatch(stderr); m != nil {
		crash = m[0]
		if want := strings.Replace(strings.Replace(fault, "crash-", "crash ", 1), "-commit:", " commit ", 1); !strings.HasPrefix(m[0], "sessiond fault: "+want+" (") {
			t.Errorf("fault %s printed %q", fault, m[0])
		}
	} else if errors.Is(err, errDown) {
		t.Errorf("the daemon died under fault %s without its line; stderr:\n%s", fault, stderr)
	}
	for _, m := range cpCommitLine.FindAllStringSubmatch(strings.SplitN(stderr, "=== sessiond run 2", 2)[0], -1) {
		n, _ := strconv.Atoi(m[1])
		commits = append(commits, cpBoundary{n, m[2]})
	}
	rec := r.record()
	if bad := crashcheck.Check(rec); len(bad) > 0 {
		t.Errorf("%s: %d invariants broken:\n  %s\nrecord:\n%s", crash, len(bad), strings.Join(bad, "\n  "), crashcheck.Describe(rec))
	}
	for _, row := range rec.Rows {
		if row.Status != "terminal" {
			t.Errorf("admission %s is %s at the end", row.InputID, row.Status)
		}
	}
	return commits, crash
}

// TestCrashPoints crashes the daemon at every commit boundary of the
// journey (see the file comment for the bound on PostgreSQL). Two runs go
// at a time: much of a run is waiting (the daemon's start, a command's
// exit, a takeover).
func TestCrashPoints(t *testing.T) {
	for _, kind := range []cpKind{cpSQLite, cpPostgres, cpPostgresTwo} {
		t.Run(string(kind), func(t *testing.T) {
			var commits []cpBoundary
			t.Run("count", func(t *testing.T) { commits, _ = runCrashPoint(t, kind, "") })
			if t.Failed() || len(commits) == 0 {
				t.Fatalf("the counting run traced %d commits", len(commits))
			}
			var labels []string
			for _, c := range commits {
				labels = append(labels, fmt.Sprintf("%d:%s", c.N, c.Label))
			}
			t.Logf("%d commits: %s", len(commits), strings.Join(labels, " "))
			stride := 1
			if kind != cpSQLite && os.Getenv("CRASHPOINTS") != "all" {
				stride = 8
			}
			if only := os.Getenv("CRASHPOINTS_ONLY"); only != "" { // a comma-separated list of N, to replay
				var keep []cpBoundary
				for _, c := range commits {
					if slices.Contains(strings.Split(only, ","), strconv.Itoa(c.N)) {
						keep = append(keep, c)
					}
				}
				commits, stride = keep, 1
			}
			var mu sync.Mutex
			hit := map[string]int{}
			t.Run("boundaries", func(t *testing.T) {
				for i := 0; i < len(commits); i += stride {
					for _, when := range []string{"before", "after"} {
						fault := fmt.Sprintf("crash-%s-commit:%d", when, commits[i].N)
						t.Run(fault, func(t *testing.T) {
							t.Parallel()
							_, crash := runCrashPoint(t, kind, fault)
							mu.Lock()
							defer mu.Unlock()
							if m := cpCrashLine.FindStringSubmatch(crash); m != nil {
								hit[m[3]]++
							} else {
								hit["(none: past the run's commits)"]++
							}
						})
					}
				}
			})
			t.Logf("crashes by transaction: %v", hit)
		})
	}
}

// TestFaultInjectionOnlyWithTheTag: the release binary ignores
// SESSIOND_FAULT (a submit commits several transactions and the daemon
// lives on, printing nothing of it); the faultinject binary dies at the
// first commit after the boot and names it.
func TestFaultInjectionOnlyWithTheTag(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	env := []string{"SESSIOND_FAULT=crash-after-commit:1", "SESSIOND_FAULT_TRACE=1"}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Env: env, Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	r := submit(t, c, s.SessionID, "one", "hello")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("turn %s", out)
	}
	if !d.Running() || strings.Contains(d.Stderr(), "sessiond fault") {
		t.Fatalf("the release binary acted on SESSIOND_FAULT (running %v); stderr:\n%s", d.Running(), d.Stderr())
	}

	fd, ready := fixtures.StartDaemonMayExit(t, fixtures.DaemonOptions{Binary: fixtures.BuildFaultBinary(t), Env: env, Config: fixtures.FakeModelConfig(m, "")})
	if ready {
		t.Fatalf("the faultinject binary became ready past its first commit")
	}
	if got := cpCrashLine.FindString(fd.Stderr()); got != "sessiond fault: crash after commit 1 (migrate)" {
		t.Fatalf("crash line %q; stderr:\n%s", got, fd.Stderr())
	}

	bad, _ := fixtures.StartDaemonMayExit(t, fixtures.DaemonOptions{Binary: fixtures.BuildFaultBinary(t), Env: []string{"SESSIOND_FAULT=crash-after-commit:0"}})
	if code, err := bad.Wait(10 * time.Second); err != nil || code != 2 || !strings.Contains(bad.Stderr(), "want crash-before-commit:N or crash-after-commit:N") {
		t.Fatalf("a bad SESSIOND_FAULT: exit %d (%v); stderr:\n%s", code, err, bad.Stderr())
	}
}
