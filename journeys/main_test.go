package journeys

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"go.uber.org/goleak"
)

// TestMain runs the journeys, then stops the package's private PostgreSQL
// servers (started by the first cluster journey or benchmark) and removes
// the binaries the harness built; a goroutine that outlived the tests fails
// the run.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	for _, stop := range stopAtExit {
		stop()
	}
	fixtures.CleanupBinaries()
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// clusterDSN is a fresh database on the package's private PostgreSQL
// cluster, dropped when t ends (after the daemons using it are killed).
func clusterDSN(t *testing.T) string { return pgtest.DSN(t) }

// wait is the deadline for "it happens soon" polls; generous for -race on
// two cores.
const wait = 30 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// snapshot mirrors the session.resume result fields the journeys check.
type snapshot struct {
	SessionID           string           `json:"session_id"`
	Title               string           `json:"title"`
	Cwd                 string           `json:"cwd"`
	Model               string           `json:"model"`
	BaseURL             string           `json:"base_url"`
	Toolsets            []string         `json:"toolsets"`
	ExecutionGeneration int64            `json:"execution_generation"`
	Running             *string          `json:"running"`
	Messages            []message        `json:"messages"`
	Prompts             []prompt         `json:"prompts"`
	Pending             []receipt        `json:"pending"`
	LastSeq             int64            `json:"last_seq"`
	Events              []fixtures.Event `json:"events"`
	SnapshotRequired    bool             `json:"snapshot_required"`
}

type message struct {
	ID          int64  `json:"id"`
	Role        string `json:"role"`
	Content     string `json:"content"`
	AdmissionID string `json:"admission_id"`
	Kind        string `json:"kind"`
}

type prompt struct {
	PromptID            string `json:"prompt_id"`
	Kind                string `json:"kind"`
	ExecutionGeneration int64  `json:"execution_generation"`
	AdmissionID         string `json:"admission_id"`
}

type receipt struct {
	AdmissionID         string  `json:"admission_id"`
	SessionID           string  `json:"session_id"`
	InputID             string  `json:"input_id"`
	Seq                 int64   `json:"seq"`
	Status              string  `json:"status"`
	Outcome             *string `json:"outcome"`
	ExecutionGeneration *int64  `json:"execution_generation"`
	Reason              string  `json:"reason"`
	Duplicate           bool    `json:"duplicate"`
	Text                string  `json:"text"`
}

func createSession(t *testing.T, c *fixtures.Client, params map[string]any) snapshot {
	t.Helper()
	if _, ok := params["cwd"]; !ok {
		params["cwd"] = t.TempDir()
	}
	var s snapshot
	if err := c.Call(ctxT(t), "session.create", params, &s); err != nil {
		t.Fatalf("session.create: %v", err)
	}
	return s
}

func resume(t *testing.T, c *fixtures.Client, sessionID string) snapshot {
	t.Helper()
	var s snapshot
	if err := c.Call(ctxT(t), "session.resume", map[string]any{"session_id": sessionID}, &s); err != nil {
		t.Fatalf("session.resume: %v", err)
	}
	return s
}

func submit(t *testing.T, c *fixtures.Client, sessionID, inputID, text string) receipt {
	t.Helper()
	var r receipt
	if err := c.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": sessionID, "input_id": inputID, "text": text}, &r); err != nil {
		t.Fatalf("prompt.submit %s: %v", inputID, err)
	}
	return r
}

// wantReason asserts that err is a JSON-RPC error with code and reason.
func wantReason(t *testing.T, err error, code int, reason string) {
	t.Helper()
	re, ok := err.(*fixtures.RPCError)
	if !ok {
		t.Fatalf("err = %v (%T), want RPC error %d/%s", err, err, code, reason)
	}
	if re.Code != code || re.Reason() != reason {
		t.Fatalf("err = %d/%s (%s), want %d/%s", re.Code, re.Reason(), re.Message, code, reason)
	}
}
