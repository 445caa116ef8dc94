package journeys

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// TestSimpleTurn: one input, one reply, streamed and persisted.
func TestSimpleTurn(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("hello there", fixtures.Reply{Text: "general kenobi"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	r := submit(t, c, s.SessionID, "in-1", "hello there")
	// The session was idle: the admit's commit also started the input
	// (issue 28), so the receipt is the started one.
	if r.Status != "started" || r.ExecutionGeneration == nil || *r.ExecutionGeneration != 1 || r.Reason != "" || r.Duplicate || r.Seq != 1 {
		t.Fatalf("receipt = %+v", r)
	}
	c.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.completed" && e.AdmissionID == r.AdmissionID })
	// The client still sees queued, started, turn.started, in seq order.
	var seen []string
	var lastSeq int64
	for _, e := range c.Events() {
		if e.AdmissionID != r.AdmissionID || e.Seq == nil {
			continue
		}
		if *e.Seq <= lastSeq {
			t.Fatalf("event seq %d after %d", *e.Seq, lastSeq)
		}
		lastSeq = *e.Seq
		typ := e.Type
		if typ == "admission.updated" {
			var p receipt
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			typ += ":" + p.Status
		}
		seen = append(seen, typ)
	}
	if len(seen) < 4 || seen[0] != "admission.updated:queued" || seen[1] != "admission.updated:started" || seen[2] != "turn.started" ||
		seen[len(seen)-1] != "turn.completed" {
		t.Fatalf("events of the turn: %v", seen)
	}
	snap := resume(t, c, s.SessionID)
	if len(snap.Messages) != 2 || snap.Messages[0].Content != "hello there" || snap.Messages[1].Content != "general kenobi" {
		t.Fatalf("messages = %+v", snap.Messages)
	}
	if len(snap.Pending) != 0 || snap.Running != nil || snap.ExecutionGeneration != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
	var deltas []string
	for _, e := range c.Events() {
		if e.Type == "message.delta" {
			if e.Seq != nil {
				t.Fatalf("a delta carries seq %d", *e.Seq)
			}
			deltas = append(deltas, string(e.Payload))
		}
	}
	if len(deltas) == 0 {
		t.Fatal("no message.delta events")
	}
	reqs := m.Requests()
	if len(reqs) != 1 || !slices.Equal(reqs[0].UserTexts, []string{"hello there"}) {
		t.Fatalf("model requests = %+v", reqs)
	}
	// The user content is a plain string.
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if _, ok := last.Content.(string); !ok || last.Role != "user" {
		t.Fatalf("last message = %#v", last)
	}
}

// TestCrashLeavesUnknownAndGracefulStopInterrupts is the real-binary test of
// issue 3: SIGKILL while a turn runs leaves it unknown and holds the
// followers until resolve_unknown; SIGTERM settles it interrupted and the
// followers run after the restart by themselves.
func TestCrashLeavesUnknownAndGracefulStopInterrupts(t *testing.T) {
	for _, mode := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(mode, func(t *testing.T) {
			m := fixtures.NewFakeModel(t)
			gate := fixtures.NewGate()
			m.On("long task", fixtures.Reply{Text: "partial answer", StreamGate: gate})
			d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
			c := d.Dial(t)
			s := createSession(t, c, map[string]any{})
			ask := submit(t, c, s.SessionID, "ask", "long task")
			<-gate.Waiting()
			f1 := submit(t, c, s.SessionID, "f1", "follower one")
			f2 := submit(t, c, s.SessionID, "f2", "follower two")
			if f1.Reason != "busy" || f2.Reason != "busy" {
				t.Fatalf("follower reasons %q %q, want busy", f1.Reason, f2.Reason)
			}
			db := fixtures.OpenStoreReadOnly(t, d.Home)
			rows := fixtures.Admissions(t, db, s.SessionID)
			if rows[0].Status != "started" || rows[1].Status != "queued" || rows[2].Status != "queued" {
				t.Fatalf("rows before the stop: %+v", rows)
			}
			gen := rows[0].ExecutionGeneration.Int64

			if mode == "SIGKILL" {
				d.SIGKILL(t)
				rows = fixtures.Admissions(t, db, s.SessionID)
				if rows[0].Status != "started" || rows[0].Outcome.Valid {
					t.Fatalf("after SIGKILL the ask must stay started without outcome: %+v", rows[0])
				}
			} else {
				if code := d.SIGTERM(t); code != 0 {
					t.Fatalf("SIGTERM exit %d", code)
				}
				rows = fixtures.Admissions(t, db, s.SessionID)
				if rows[0].Status != "terminal" || rows[0].Outcome.String != "interrupted" {
					t.Fatalf("after SIGTERM the ask must be terminal/interrupted: %+v", rows[0])
				}
			}
			if rows[1].Status != "queued" || rows[2].Status != "queued" {
				t.Fatalf("followers must stay queued: %+v", rows)
			}
			if n := len(m.RequestsWithLastUser("follower one")); n != 0 {
				t.Fatalf("follower reached the model %d times before the restart", n)
			}

			d.Restart(t)
			c = d.Dial(t)
			if mode == "SIGKILL" {
				snap := resume(t, c, s.SessionID)
				if len(snap.Pending) != 3 || snap.Pending[0].Status != "unknown" || snap.Pending[1].Status != "queued" ||
					snap.Pending[1].Reason != "unknown" || snap.Pending[2].InputID != "f2" {
					t.Fatalf("pending after crash = %+v", snap.Pending)
				}
				// Nothing runs behind the unknown admission.
				rows = fixtures.Admissions(t, db, s.SessionID)
				if rows[1].Status != "queued" {
					t.Fatalf("follower moved behind an unknown admission: %+v", rows[1])
				}
				// Wrong generation and wrong state are refused.
				err := c.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": s.SessionID, "admission_id": ask.AdmissionID, "execution_generation": gen + 1}, nil)
				wantReason(t, err, -32000, "stale_generation")
				err = c.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": s.SessionID, "admission_id": f1.AdmissionID, "execution_generation": gen}, nil)
				wantReason(t, err, -32000, "stale_generation")
				err = c.Call(ctxT(t), "prompt.cancel", map[string]any{"session_id": s.SessionID, "admission_id": ask.AdmissionID}, nil)
				wantReason(t, err, -32000, "unknown_execution")
				var res receipt
				if err := c.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": s.SessionID, "admission_id": ask.AdmissionID, "execution_generation": gen}, &res); err != nil {
					t.Fatal(err)
				}
				if res.Status != "terminal" || res.Outcome == nil || *res.Outcome != "interrupted" {
					t.Fatalf("resolve receipt = %+v", res)
				}
			}
			fixtures.Eventually(t, wait, "followers completed", func() bool {
				rows = fixtures.Admissions(t, db, s.SessionID)
				return rows[2].Status == "terminal"
			})
			for _, r := range rows[1:] {
				if r.Outcome.String != "completed" {
					t.Fatalf("follower %s ended %s", r.InputID, r.Outcome.String)
				}
			}
			if n := len(m.RequestsWithLastUser("long task")); n != 1 {
				t.Fatalf("the ask reached the model %d times, want exactly once", n)
			}
			reqs := m.RequestsWithLastUser("follower one")
			if len(reqs) != 1 || !slices.Equal(reqs[0].UserTexts, []string{"long task", "follower one"}) {
				t.Fatalf("follower one's request user texts = %v", reqs)
			}
			// The lost turn is closed by a boundary before the follower.
			var roles []string
			for _, msg := range reqs[0].Messages {
				roles = append(roles, msg.Role)
			}
			if got := strings.Join(roles, ","); got != "system,user,assistant,user" {
				t.Fatalf("roles of follower one's request = %s", got)
			}
			order := []string{}
			for _, r := range m.Requests() {
				order = append(order, r.LastUserText())
			}
			if fmt.Sprint(order) != "[long task follower one follower two]" {
				t.Fatalf("model saw %v", order)
			}
		})
	}
}
