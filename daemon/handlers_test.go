package daemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// startTest starts an in-process daemon whose model parks every turn.
func startTest(t *testing.T, extra string) *Daemon { return startTestWith(t, extra, nil) }

// startTestWith is startTest with the fake model's extra script (nil:
// none); every other reply parks until the test ends.
func startTestWith(t testing.TB, extra string, script func(*fixtures.FakeModel)) *Daemon {
	t.Helper()
	m := fixtures.NewFakeModel(t)
	park := fixtures.NewGate()
	t.Cleanup(park.Release)
	m.Default(fixtures.Reply{Text: "parked", Gate: park})
	if script != nil {
		script(m)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(fixtures.FakeModelConfig(m, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), Options{Home: home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

// call runs a typed handler as the routes do: decoded and validated
// params, the one error path.
func call[P, R any](t *testing.T, h func(context.Context, *rpc.Conn, P) (R, error), params any) (any, error) {
	t.Helper()
	b, _ := json.Marshal(params)
	return wireHandler(rpc.Typed(h))(context.Background(), nil, b)
}

func mustSession(t *testing.T, d *Daemon) string {
	t.Helper()
	var id string
	err := d.db.InTx(context.Background(), func(tx *store.Tx) (err error) {
		ts := []string{"terminal"}
		id, err = d.createSession(tx, protocol.SessionCreateParams{Cwd: t.TempDir(), Model: "m", Provider: "openai", BaseURL: "http://127.0.0.1:1/v1", Toolsets: &ts})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func wantWire(t *testing.T, err error, reason protocol.Reason) {
	t.Helper()
	var re *protocol.Error
	if !errors.As(err, &re) || re.Reason != reason {
		t.Fatalf("err = %v, want reason %s", err, reason)
	}
}

func TestSubmitValidatesInput(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	for name, p := range map[string]map[string]any{
		"bad charset": {"session_id": sid, "input_id": "has space", "text": "x"},
		"too long":    {"session_id": sid, "input_id": strings.Repeat("a", 129), "text": "x"},
		"empty id":    {"session_id": sid, "input_id": "", "text": "x"},
		"empty text":  {"session_id": sid, "input_id": "ok", "text": ""},
		"huge text":   {"session_id": sid, "input_id": "ok", "text": strings.Repeat("x", (1<<20)+1)},
		"attachments": {"session_id": sid, "input_id": "ok", "text": "x", "attachments": "nope"},
	} {
		_, err := call(t, d.promptSubmit, p)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		wantWire(t, err, protocol.ReasonInvalidParams)
	}
	_, err := call(t, d.promptSubmit, map[string]any{"session_id": "ses_nope", "input_id": "ok", "text": "x"})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = call(t, d.promptCancel, map[string]any{"session_id": sid, "admission_id": "adm_nope"})
	wantWire(t, err, protocol.ReasonNotFound)
	var n int
	d.db.Get(context.Background(), &n, `SELECT count(*) FROM session_admissions`)
	if n != 0 {
		t.Fatalf("%d admissions after refused submits", n)
	}
}

func TestSubmitWhileDrainingIsRefused(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	d.draining.Store(true)
	_, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "late", "text": "x"})
	wantWire(t, err, protocol.ReasonDraining)
	_, err = call(t, d.sessionCreate, map[string]any{"cwd": t.TempDir()})
	wantWire(t, err, protocol.ReasonDraining)
	d.draining.Store(false)
}

func TestStorageUnavailableAcknowledgesNothingAndRecovers(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	ctx := context.Background()
	// Another process holds the write lock past busy_timeout.
	other, err := sql.Open("sqlite", store.DSN(d.db.Path(), true, store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hold, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(`UPDATE sessions SET title = title`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "locked", "text": "x"})
	wantWire(t, err, protocol.ReasonStorageUnavailable)
	t.Logf("refused after %v (busy_timeout)", time.Since(start).Round(time.Millisecond))
	hold.Rollback()
	var n int
	d.db.Get(ctx, &n, `SELECT count(*) FROM session_admissions`)
	if n != 0 {
		t.Fatalf("%d admissions committed while the store was locked", n)
	}
	// Once the lock is gone, the same input is admitted: nothing was
	// acknowledged before.
	res, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "locked", "text": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(protocol.Receipt); r.Duplicate || r.Seq != 1 {
		t.Fatalf("receipt after recovery = %+v", r)
	}
}

func TestAttachmentsDigestIgnoresFormatting(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	first, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "att", "text": "x",
		"attachments": json.RawMessage(`[{"b":1,"a":"y"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	again, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "att", "text": "x",
		"attachments": json.RawMessage(`[ { "a" : "y", "b" : 1 } ]`)})
	if err != nil {
		t.Fatalf("same attachments, other formatting: %v", err)
	}
	if r := again.(protocol.Receipt); !r.Duplicate || r.AdmissionID != first.(protocol.Receipt).AdmissionID {
		t.Fatalf("receipt = %+v", r)
	}
	_, err = call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "att", "text": "x",
		"attachments": json.RawMessage(`[{"a":"y","b":2}]`)})
	wantWire(t, err, protocol.ReasonAdmissionConflict)
	// The error names the admission the input_id already is.
	if re := (*protocol.Error)(nil); !errors.As(err, &re) || re.Data["admission_id"] != first.(protocol.Receipt).AdmissionID {
		t.Fatalf("conflict data %+v, want admission_id %s", re, first.(protocol.Receipt).AdmissionID)
	}
}

func TestApprovalsListShowsRememberedPatterns(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	err := d.db.InTx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.Exec(`INSERT INTO approval_allowlist (pattern, created_at) VALUES ('rm-recursive', ?)`, store.Now()); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO session_approvals (session_id, pattern, created_at) VALUES (?, 'git-push-force', ?)`, sid, store.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call(t, d.approvalsList, map[string]any{"session_id": sid})
	if err != nil {
		t.Fatal(err)
	}
	l := res.(protocol.ApprovalsList)
	if len(l.Always) != 1 || l.Always[0].Pattern != "rm-recursive" || len(l.Session) != 1 || l.Session[0].Pattern != "git-push-force" {
		t.Fatalf("approvals.list = %+v", l)
	}
	res, _ = call(t, d.approvalsList, map[string]any{})
	if l := res.(protocol.ApprovalsList); len(l.Always) != 1 || l.Session != nil {
		t.Fatalf("without a session: %+v", l)
	}
	_, err = call(t, d.approvalsList, map[string]any{"session_id": "ses_nope"})
	wantWire(t, err, protocol.ReasonNotFound)
}

func TestLimitsRefuseWithClearErrors(t *testing.T) {
	d := startTest(t, "limits: {max_queued_per_session: 2, max_input_bytes: 16}")
	sid := mustSession(t, d)
	_, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "big", "text": strings.Repeat("x", 17)})
	wantWire(t, err, protocol.ReasonInvalidParams)
	// The first input starts (and parks on the model); two more may queue.
	for _, id := range []string{"a", "b", "c"} {
		if _, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": id, "text": "x"}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if id == "a" {
			waitFor(t, func() bool { _, ok := d.sched.Running(sid); return ok })
		}
	}
	_, err = call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "d", "text": "x"})
	wantWire(t, err, protocol.ReasonOverloaded)
	// A duplicate of an admitted input is still answered.
	if res, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "b", "text": "x"}); err != nil || !res.(protocol.Receipt).Duplicate {
		t.Fatalf("duplicate while full: %v %v", res, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	fixtures.Eventually(t, 10*time.Second, "the condition", cond)
}

func TestMaxConnectionsClosesWith1013(t *testing.T) {
	d := startTest(t, "limits: {max_connections: 2}")
	ctx := context.Background()
	opts := &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + d.token}}, Subprotocols: []string{SubprotocolV1}}
	var conns []*websocket.Conn
	for i := 0; i < 2; i++ {
		c, _, err := websocket.Dial(ctx, d.desc.URL, opts)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.info"}`))
		if _, _, err := c.Read(ctx); err != nil { // registered and served
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	extra, _, err := websocket.Dial(ctx, d.desc.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = extra.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Fatalf("third connection: %v, want close 1013", err)
	}
	conns[0].Close(websocket.StatusNormalClosure, "")
	waitFor(t, func() bool { d.connMu.Lock(); defer d.connMu.Unlock(); return len(d.conns) < 2 })
	again, _, err := websocket.Dial(ctx, d.desc.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	again.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.info"}`))
	if _, _, err := again.Read(ctx); err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
	again.CloseNow()
	conns[1].CloseNow()
}

func TestClarifyAnswerShapes(t *testing.T) {
	for raw, want := range map[string]any{
		`"yes"`: "yes", `""`: "", `["a","b"]`: []string{"a", "b"}, `[]`: []string{},
	} {
		got, ok := clarifyAnswer(json.RawMessage(raw))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("clarifyAnswer(%s) = %#v %v, want %#v", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`null`, `[null]`, `["a",null]`, `1`, `{"a":"b"}`, `[1]`, `true`} {
		if got, ok := clarifyAnswer(json.RawMessage(raw)); ok {
			t.Errorf("clarifyAnswer(%s) = %#v, want refused", raw, got)
		}
	}
}
