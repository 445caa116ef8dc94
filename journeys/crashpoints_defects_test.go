package journeys

import (
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/crashcheck"
)

// cpGoodRecord fabricates the record of a clean run of the crash-point
// journey: every input admitted, run once in FIFO order, the approved rm
// approved, the denied one denied.
func cpGoodRecord() crashcheck.Record {
	r := crashcheck.Record{Sessions: []string{"ses_1", "ses_2"}, Inputs: cpInputs(), Acked: map[string]string{},
		CancelAcked: map[string]bool{}, Resolved: map[string]bool{}}
	seq, gen := [2]int64{}, [2]int64{}
	history := [2][]fixtures.RecordedMessage{{{Role: "system", Content: "sys"}}, {{Role: "system", Content: "sys"}}}
	for _, in := range r.Inputs {
		s := in.Session
		seq[s]++
		row := crashcheck.Row{AdmissionID: "adm_" + in.ID, SessionID: r.Sessions[s], InputID: in.ID, Seq: seq[s],
			Status: "terminal", Outcome: sql.NullString{String: in.Want[0], Valid: true}}
		r.Acked[in.ID] = row.AdmissionID
		if in.ID == "cancel" {
			r.CancelAcked[row.AdmissionID] = true
			r.Rows = append(r.Rows, row)
			continue
		}
		gen[s]++
		row.ExecutionGeneration = sql.NullInt64{Int64: gen[s], Valid: true}
		r.Rows = append(r.Rows, row)
		history[s] = append(history[s], fixtures.RecordedMessage{Role: "user", Content: in.Text})
		r.Requests = append(r.Requests, fixtures.RecordedRequest{Messages: slices.Clone(history[s])})
		if in.ID == "safe" || in.ID == "approved" {
			call := fixtures.FakeToolCall{ID: "call_" + in.ID, Name: "terminal", Arguments: "{}"}
			history[s] = append(history[s],
				fixtures.RecordedMessage{Role: "assistant", ToolCalls: []fixtures.FakeToolCall{call}},
				fixtures.RecordedMessage{Role: "tool", ToolCallID: call.ID, Content: "ok"})
			r.Requests = append(r.Requests, fixtures.RecordedRequest{Messages: slices.Clone(history[s]), LastIsToolResult: true})
		}
		history[s] = append(history[s], fixtures.RecordedMessage{Role: "assistant", Content: "done"})
	}
	r.Gated = []crashcheck.Gated{{Command: "rm -rf -- /w/scratch", Ran: true}, {Command: "rm -rf -- /w/keep"}}
	r.Approvals = []crashcheck.Approval{{Command: "rm -rf -- /w/scratch", Choice: "once"}, {Command: "rm -rf -- /w/keep", Choice: "deny"}}
	return r
}

func cpRow(r *crashcheck.Record, id string) *crashcheck.Row {
	for i := range r.Rows {
		if r.Rows[i].InputID == id {
			return &r.Rows[i]
		}
	}
	panic("no row " + id)
}

func cpRequestOf(r *crashcheck.Record, text string) int {
	for i, req := range r.Requests {
		m := req.Messages
		if len(m) > 0 && m[len(m)-1].Role == "user" && m[len(m)-1].Content == text {
			return i
		}
	}
	panic("no request for " + text)
}

// TestCrashInvariantsCatchPlantedDefects shows each invariant of the
// crash-point journeys failing: a clean fabricated record passes, and the
// same record with one defect planted breaks exactly the invariant that
// must catch it.
func TestCrashInvariantsCatchPlantedDefects(t *testing.T) {
	if bad := crashcheck.Check(cpGoodRecord()); len(bad) > 0 {
		t.Fatalf("the clean record breaks invariants:\n%s", strings.Join(bad, "\n"))
	}
	text := func(id string) string {
		for _, in := range cpInputs() {
			if in.ID == id {
				return in.Text
			}
		}
		panic(id)
	}
	cases := []struct {
		name  string
		plant func(r *crashcheck.Record)
		want  string
	}{
		{"an acknowledged input lost (its admission rolled back after the receipt)", func(r *crashcheck.Record) {
			r.Rows = slices.DeleteFunc(r.Rows, func(row crashcheck.Row) bool { return row.InputID == "approved" })
		}, "acknowledged input approved (admission adm_approved) has no row"},
		{"a receipt naming another input's admission", func(r *crashcheck.Record) { r.Acked["safe"] = "adm_clarify" }, "acknowledged for safe is the row of"},
		{"an acknowledged cancel whose input ran", func(r *crashcheck.Record) {
			cpRow(r, "cancel").Outcome.String = "completed"
		}, "cancel of adm_cancel was acknowledged"},
		{"an input re-sent to the model after a restart", func(r *crashcheck.Record) {
			r.Requests = append(r.Requests, r.Requests[cpRequestOf(r, text("stream"))])
		}, "input stream (" + `"` + text("stream") + `") reached the model 2 times`},
		{"a turn settled completed before its model request was made", func(r *crashcheck.Record) {
			i := cpRequestOf(r, text("last1"))
			r.Requests = slices.Delete(r.Requests, i, i+1)
		}, "input last1 completed but reached the model 0 times"},
		{"an input merged twice into one history", func(r *crashcheck.Record) {
			i := cpRequestOf(r, text("last1"))
			m := r.Requests[i].Messages
			r.Requests[i].Messages = append(slices.Clone(m[:len(m)-1]), fixtures.RecordedMessage{Role: "user", Content: text("stream")}, m[len(m)-1])
		}, "carries input"},
		{"a cancelled input that reached the model", func(r *crashcheck.Record) {
			r.Requests = append(r.Requests, fixtures.RecordedRequest{Messages: []fixtures.RecordedMessage{{Role: "user", Content: text("cancel")}}})
		}, "input cancel was cancelled but reached the model"},
		{"a gated command run without approval (the denied rm ran)", func(r *crashcheck.Record) { r.Gated[1].Ran = true }, "gated command \"rm -rf -- /w/keep\" ran without approval"},
		{"a gated command run with its approval prompt never answered", func(r *crashcheck.Record) { r.Approvals = r.Approvals[1:] }, "gated command \"rm -rf -- /w/scratch\" ran without approval"},
		{"FIFO order broken (the later input claimed first)", func(r *crashcheck.Record) {
			a, d := cpRow(r, "approved"), cpRow(r, "denied")
			a.Seq, d.Seq = d.Seq, a.Seq
		}, "FIFO order or one turn at a time broken"},
		{"two turns of one session at once (a turn's request after the next turn began)", func(r *crashcheck.Record) {
			i := cpRequestOf(r, text("safe"))
			follow := r.Requests[i+1] // the tool result request of the safe command's turn
			r.Requests = slices.Delete(r.Requests, i+1, i+2)
			j := cpRequestOf(r, text("clarify"))
			r.Requests = slices.Insert(r.Requests, j+1, follow)
		}, "FIFO order or one turn at a time broken"},
		{"claims out of order (generations not growing with seq)", func(r *crashcheck.Record) {
			cpRow(r, "stream").ExecutionGeneration.Int64 = 9
		}, "generations by seq"},
		{"a tool call without its result in the next request (an interrupted turn not closed)", func(r *crashcheck.Record) {
			i := cpRequestOf(r, text("clarify"))
			m := r.Requests[i].Messages
			broken := append(slices.Clone(m[:len(m)-1]), fixtures.RecordedMessage{Role: "assistant", ToolCalls: []fixtures.FakeToolCall{{ID: "call_lost", Name: "terminal"}}}, m[len(m)-1])
			r.Requests[i].Messages = broken
		}, "invalid history: message"},
		{"a tool result without its call", func(r *crashcheck.Record) {
			i := cpRequestOf(r, text("last2"))
			m := r.Requests[i].Messages
			r.Requests[i].Messages = append(slices.Clone(m[:len(m)-1]), fixtures.RecordedMessage{Role: "tool", ToolCallID: "call_x", Content: "not run"}, m[len(m)-1])
		}, "answers no call"},
		{"user content sent as parts", func(r *crashcheck.Record) {
			i := cpRequestOf(r, text("last2"))
			r.Requests[i].Messages[1].Content = []any{map[string]any{"type": "text", "text": "x"}}
		}, "user content is []interface {}"},
		{"two started admissions in one session", func(r *crashcheck.Record) { r.TwoStarted = []string{"session 1 at 03:00:00.000"} }, "two started admissions in one session"},
		{"an admission left unknown at the end", func(r *crashcheck.Record) {
			row := cpRow(r, "clarify")
			row.Status, row.Outcome = "unknown", sql.NullString{}
		}, "admission of clarify is unknown at the end, not terminal"},
		{"an admission interrupted that nobody interrupted or resolved", func(r *crashcheck.Record) {
			cpRow(r, "denied").Outcome.String = "interrupted"
		}, "admission of denied ended interrupted"},
		{"a turn that failed", func(r *crashcheck.Record) { cpRow(r, "last2").Outcome.String = "failed" }, "admission of last2 ended failed"},
		{"an input admitted twice", func(r *crashcheck.Record) {
			dup := *cpRow(r, "stream")
			dup.AdmissionID, dup.Seq = "adm_again", 99
			r.Rows = append(r.Rows, dup)
		}, "has two admissions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cpGoodRecord()
			c.plant(&r)
			bad := crashcheck.Check(r)
			if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Fatalf("planted %q: want a violation containing %q, got %q", c.name, c.want, bad)
			}
		})
	}
	// An admission resolved as unknown may end interrupted.
	r := cpGoodRecord()
	cpRow(&r, "denied").Outcome.String = "interrupted"
	r.Resolved["adm_denied"] = true
	if bad := crashcheck.Check(r); len(bad) > 0 {
		t.Fatalf("a resolved unknown ending interrupted is allowed; got %q", bad)
	}
}
