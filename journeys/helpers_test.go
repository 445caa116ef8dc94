package journeys

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
)

// Shared helpers of the restart, receipts, transcript and reconnect
// journeys. They only speak the wire and the storage contract.

// storedEvent is one row of the events table (docs/protocol.md Part 2 F).
type storedEvent struct {
	Seq         int64          `db:"seq"`
	Type        string         `db:"type"`
	AdmissionID sql.NullString `db:"admission_id"`
	Generation  sql.NullInt64  `db:"execution_generation"`
	Payload     string         `db:"payload"`
}

func (e storedEvent) String() string {
	return fmt.Sprintf("#%d:%s(%s)", e.Seq, e.Type, e.AdmissionID.String)
}

// storedEventsAfter returns the durable events of sessionID with seq >
// after, in seq order, as the store holds them (SQLite or PostgreSQL).
func storedEventsAfter(t *testing.T, db *sqlx.DB, sessionID string, after int64) []storedEvent {
	t.Helper()
	var evs []storedEvent
	if err := db.Select(&evs, db.Rebind(`SELECT seq, type, admission_id, execution_generation, CAST(payload AS TEXT) AS payload
		FROM events WHERE session_id = ? AND seq > ? ORDER BY seq`), sessionID, after); err != nil {
		t.Fatalf("reading events of %s: %v", sessionID, err)
	}
	return evs
}

// durableEvents returns the events of sessionID with a seq (deltas have
// none) in arrival order.
func durableEvents(evs []fixtures.Event, sessionID string) []fixtures.Event {
	var out []fixtures.Event
	for _, e := range evs {
		if e.SessionID == sessionID && e.Seq != nil {
			out = append(out, e)
		}
	}
	return out
}

// maxSeq is the highest seq among evs, or floor when it is higher.
func maxSeq(evs []fixtures.Event, floor int64) int64 {
	for _, e := range evs {
		if e.Seq != nil && *e.Seq > floor {
			floor = *e.Seq
		}
	}
	return floor
}

func describeEvents(evs []fixtures.Event) string {
	var parts []string
	for _, e := range evs {
		seq := "null"
		if e.Seq != nil {
			seq = fmt.Sprint(*e.Seq)
		}
		parts = append(parts, fmt.Sprintf("#%s:%s(%s)", seq, e.Type, e.AdmissionID))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// sameEvents asserts that got (events a client received) are exactly want
// (the store's rows): the same seqs in the same order, each once, with the
// same type, admission and generation.
func sameEvents(t *testing.T, what string, got []fixtures.Event, want []storedEvent) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		var gen int64
		if g.ExecutionGeneration != nil {
			gen = *g.ExecutionGeneration
		}
		ok = g.Seq != nil && *g.Seq == w.Seq && g.Type == w.Type && g.AdmissionID == w.AdmissionID.String && gen == w.Generation.Int64
	}
	if !ok {
		t.Fatalf("%s: client got %d events %s, the store holds %d: %v", what, len(got), describeEvents(got), len(want), want)
	}
}

// resumeAfter is session.resume with after_seq.
func resumeAfter(t *testing.T, c *fixtures.Client, sessionID string, after int64) snapshot {
	t.Helper()
	var s snapshot
	if err := c.Call(ctxT(t), "session.resume", map[string]any{"session_id": sessionID, "after_seq": after}, &s); err != nil {
		t.Fatalf("session.resume after_seq %d: %v", after, err)
	}
	return s
}

type respondResult struct {
	Status   string `json:"status"`
	PromptID string `json:"prompt_id"`
}

// answerApproval calls approval.respond for p with choice.
func answerApproval(t *testing.T, c *fixtures.Client, sessionID string, p prompt, choice string) (respondResult, error) {
	t.Helper()
	var r respondResult
	err := c.Call(ctxT(t), "approval.respond", map[string]any{"session_id": sessionID, "prompt_id": p.PromptID,
		"execution_generation": p.ExecutionGeneration, "choice": choice}, &r)
	return r, err
}

// answerClarify calls clarify.respond for p with answer.
func answerClarify(t *testing.T, c *fixtures.Client, sessionID string, p prompt, answer any) (respondResult, error) {
	t.Helper()
	var r respondResult
	err := c.Call(ctxT(t), "clarify.respond", map[string]any{"session_id": sessionID, "prompt_id": p.PromptID,
		"execution_generation": p.ExecutionGeneration, "answer": answer}, &r)
	return r, err
}

// resolveUnknownAdmission calls prompt.resolve_unknown and asserts the
// receipt is terminal/interrupted.
func resolveUnknownAdmission(t *testing.T, c *fixtures.Client, sessionID, admissionID string, gen int64) receipt {
	t.Helper()
	var r receipt
	if err := c.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": sessionID,
		"admission_id": admissionID, "execution_generation": gen}, &r); err != nil {
		t.Fatalf("prompt.resolve_unknown %s: %v", admissionID, err)
	}
	if r.AdmissionID != admissionID || r.Status != "terminal" || r.Outcome == nil || *r.Outcome != "interrupted" {
		t.Fatalf("resolve_unknown receipt = %+v, want %s terminal/interrupted", r, admissionID)
	}
	return r
}

// waitAllTerminal polls the store until every admission of sessionID is
// terminal and returns the rows.
func waitAllTerminal(t *testing.T, db *sqlx.DB, sessionID string) []fixtures.AdmissionRow {
	t.Helper()
	var rows []fixtures.AdmissionRow
	fixtures.Eventually(t, wait, "every admission of "+sessionID+" terminal", func() bool {
		rows = fixtures.Admissions(t, db, sessionID)
		for _, r := range rows {
			if r.Status != "terminal" {
				return false
			}
		}
		return len(rows) > 0
	})
	return rows
}

// admissionRow returns the row of admissionID among rows.
func admissionRow(t *testing.T, rows []fixtures.AdmissionRow, admissionID string) fixtures.AdmissionRow {
	t.Helper()
	for _, r := range rows {
		if r.AdmissionID == admissionID {
			return r
		}
	}
	t.Fatalf("admission %s not in %+v", admissionID, rows)
	return fixtures.AdmissionRow{}
}

// wantRow asserts an admission row's status and outcome ("" for none).
func wantRow(t *testing.T, r fixtures.AdmissionRow, status, outcome string) {
	t.Helper()
	if r.Status != status || r.Outcome.String != outcome || r.Outcome.Valid != (outcome != "") {
		t.Fatalf("admission %s (%s) is %s/%v, want %s/%q", r.AdmissionID, r.InputID, r.Status, r.Outcome, status, outcome)
	}
}

// requestIndexes returns the positions, among all recorded requests, of
// the requests whose last user text is text.
func requestIndexes(m *fixtures.FakeModel, text string) []int {
	var idx []int
	for i, r := range m.Requests() {
		if r.LastUserText() == text {
			idx = append(idx, i)
		}
	}
	return idx
}

// makeVictim creates DIR/name holding a file and returns both paths.
func makeVictim(t *testing.T, dir, name string) (victimDir, victimFile string) {
	t.Helper()
	victimDir = filepath.Join(dir, name)
	victimFile = filepath.Join(victimDir, "precious.txt")
	if err := os.MkdirAll(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victimFile, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	return victimDir, victimFile
}

// wantIntact asserts that the file still exists with its content.
func wantIntact(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil || string(b) != "keep me" {
		t.Fatalf("%s was touched: %q, %v", file, b, err)
	}
}

// promptPayload decodes the payload of the prompt.opened event of p.
func promptPayload(t *testing.T, c *fixtures.Client, p prompt) map[string]any {
	t.Helper()
	for _, e := range c.Events() {
		if e.Type != "prompt.opened" {
			continue
		}
		var body struct {
			Prompt struct {
				PromptID string         `json:"prompt_id"`
				Payload  map[string]any `json:"payload"`
			} `json:"prompt"`
		}
		if json.Unmarshal(e.Payload, &body) == nil && body.Prompt.PromptID == p.PromptID {
			return body.Prompt.Payload
		}
	}
	t.Fatalf("no prompt.opened event for %s", p.PromptID)
	return nil
}

// waitParked waits (at most the journey deadline) until a request is
// parked at g, e.g. the model call a turn is held on.
func waitParked(t *testing.T, g *fixtures.Gate, what string) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-g.Waiting():
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s to reach the model", wait, what)
	}
}

// needRoot skips a root-only test on a developer's run as another user;
// under CI (CI set: it runs as root) it fails instead, since a skip there
// would hide the missing capability.
func needRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: needs root, and CI runs as root", why)
	}
	t.Skipf("%s: needs root (CI runs it)", why)
}
