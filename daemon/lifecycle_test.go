package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// liveSession creates a session on the daemon's fake model (its turns park).
func liveSession(t *testing.T, d *Daemon) string {
	t.Helper()
	p := protocol.SessionCreateParams{Cwd: t.TempDir()}
	if err := d.normalizeCreate(&p); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := d.db.InTx(context.Background(), func(tx *store.Tx) (err error) { id, err = d.createSession(tx, p); return err }); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestSessionUpdateRenames(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	res, err := call(t, d.sessionUpdate, map[string]any{"session_id": sid, "title": "new name"})
	if err != nil {
		t.Fatal(err)
	}
	if row := res.(protocol.SessionSummary); row.SessionID != sid || row.Title != "new name" || row.Cwd == "" || row.CreatedAt == "" {
		t.Fatalf("session.update = %+v", row)
	}
	snap, err := d.snapshot(sid, nil)
	if err != nil || snap.Title != "new name" {
		t.Fatalf("snapshot after the rename: %q %v", snap.Title, err)
	}
	for _, bad := range []map[string]any{
		{"session_id": sid},
		{"session_id": sid, "title": nil},
		{"session_id": sid, "title": "  "},
		{"session_id": sid, "title": strings.Repeat("x", 501)},
		{"title": "x"},
	} {
		_, err := call(t, d.sessionUpdate, bad)
		wantWire(t, err, protocol.ReasonInvalidParams)
	}
	_, err = call(t, d.sessionUpdate, map[string]any{"session_id": "ses_nope", "title": "x"})
	wantWire(t, err, protocol.ReasonNotFound)
	if snap, _ := d.snapshot(sid, nil); snap.Title != "new name" {
		t.Fatalf("a refused update changed the title to %q", snap.Title)
	}
}

// TestSessionDelete: refused while a turn runs (session_busy) and while an
// unknown admission holds the session (unknown_execution); once idle, one
// call removes the session's rows from every table, its ids answer
// not_found, other sessions keep theirs, and the text is scrubbed from
// state.db.
func TestSessionDelete(t *testing.T) {
	d := startTest(t, "")
	ctx := context.Background()
	sid := liveSession(t, d)
	other := liveSession(t, d)
	const secret = "delete-me-7f3a9c the only copy of this text"
	res, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "in-1", "text": secret})
	if err != nil {
		t.Fatal(err)
	}
	aid := res.(protocol.Receipt).AdmissionID
	if _, err := call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "in-2", "text": "queued behind"}); err != nil {
		t.Fatal(err)
	}
	if err := d.db.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(`INSERT INTO session_approvals (session_id, pattern, created_at) VALUES (?, 'rm-recursive', ?)`, sid, store.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := d.sched.Running(sid); return ok })

	_, err = call(t, d.sessionDelete, map[string]any{"session_id": sid})
	wantWire(t, err, protocol.ReasonSessionBusy)

	if _, _, err := d.sched.Interrupt(ctx, sid, 0); err != nil {
		t.Fatal(err)
	}
	// The queued input starts next and parks: interrupt it too.
	waitFor(t, func() bool { a, ok := d.sched.Running(sid); return ok && a.AdmissionID != aid })
	if _, _, err := d.sched.Interrupt(ctx, sid, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := d.sched.Running(sid); return !ok })

	// An unknown admission (as a crash leaves it) holds the session.
	if err := d.db.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(`UPDATE session_admissions SET status = 'unknown', outcome = NULL WHERE admission_id = ?`, aid)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = call(t, d.sessionDelete, map[string]any{"session_id": sid})
	wantWire(t, err, protocol.ReasonUnknownExecution)
	if err := d.db.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(`UPDATE session_admissions SET status = 'terminal', outcome = 'interrupted' WHERE admission_id = ?`, aid)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	res, err = call(t, d.sessionDelete, map[string]any{"session_id": sid})
	if err != nil || !res.(protocol.SessionDeleteResult).Deleted {
		t.Fatalf("session.delete of an idle session: %v %v", res, err)
	}
	for _, table := range []string{"sessions", "session_admissions", "messages", "prompts", "events", "session_approvals"} {
		col := "session_id"
		if table == "session_admissions" {
			col = "target_session_id"
		}
		var n int
		if err := d.db.Get(ctx, &n, `SELECT count(*) FROM `+table+` WHERE `+col+` = ?`, sid); err != nil || n != 0 {
			t.Fatalf("%d rows of the deleted session left in %s (%v)", n, table, err)
		}
	}
	if _, err := d.snapshot(other, nil); err != nil {
		t.Fatalf("the other session: %v", err)
	}
	_, err = call(t, d.sessionDelete, map[string]any{"session_id": sid})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = d.snapshot(sid, nil)
	wantWire(t, wireErr(err), protocol.ReasonNotFound)
	_, err = call(t, d.promptSubmit, map[string]any{"session_id": sid, "input_id": "in-3", "text": "x"})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = call(t, d.promptCancel, map[string]any{"session_id": sid, "admission_id": aid})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = call(t, d.sessionDelete, map[string]any{})
	wantWire(t, err, protocol.ReasonInvalidParams)

	// secure_delete: once the WAL is checkpointed, the file holds no copy.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{StateFile, StateFile + "-wal"} {
		b, err := os.ReadFile(filepath.Join(d.home, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("delete-me-7f3a9c")) {
			t.Fatalf("%s still holds the deleted session's text", f)
		}
	}
}

func TestApprovalsRevoke(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	err := d.db.InTx(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.Exec(`INSERT INTO approval_allowlist (pattern, created_at) VALUES ('rm-recursive', ?), ('git-push-force', ?)`, store.Now(), store.Now()); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO session_approvals (session_id, pattern, created_at) VALUES (?, 'rm-recursive', ?)`, sid, store.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call(t, d.approvalsRevoke, map[string]any{"pattern": "rm-recursive"})
	if err != nil || !res.(protocol.ApprovalsRevokeResult).Revoked {
		t.Fatalf("revoke always: %v %v", res, err)
	}
	res, _ = call(t, d.approvalsList, map[string]any{"session_id": sid})
	if l := res.(protocol.ApprovalsList); len(l.Always) != 1 || l.Always[0].Pattern != "git-push-force" || len(l.Session) != 1 {
		t.Fatalf("after revoking the always rule: %+v", l)
	}
	if ok, err := d.prompts.Allowed(context.Background(), mustSession(t, d), "rm-recursive"); ok || err != nil {
		t.Fatalf("a revoked always pattern is still allowed in a new session (%v)", err)
	}
	_, err = call(t, d.approvalsRevoke, map[string]any{"pattern": "rm-recursive"})
	wantWire(t, err, protocol.ReasonNotFound)
	if _, err := call(t, d.approvalsRevoke, map[string]any{"pattern": "rm-recursive", "session_id": sid}); err != nil {
		t.Fatalf("revoke the session rule: %v", err)
	}
	if ok, _ := d.prompts.Allowed(context.Background(), sid, "rm-recursive"); ok {
		t.Fatal("a revoked session pattern is still allowed")
	}
	_, err = call(t, d.approvalsRevoke, map[string]any{"pattern": "rm-recursive", "session_id": sid})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = call(t, d.approvalsRevoke, map[string]any{"pattern": "x", "session_id": "ses_nope"})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = call(t, d.approvalsRevoke, map[string]any{"pattern": " "})
	wantWire(t, err, protocol.ReasonInvalidParams)
}

// TestSessionUpdateSettings: session.update changes a session's model and
// approvals mode and narrows its sandbox, durably (a restarted daemon on
// the home reads them back); a wider sandbox, an unknown mode or an empty
// model is invalid_params and changes nothing.
func TestSessionUpdateSettings(t *testing.T) {
	d := startTest(t, "sandbox: {mode: workspace-write, network: false}\napprovals: {mode: manual}\nmodel: {choices: [other-model, fake-model]}\n")
	sid := mustSession(t, d)
	snap, err := d.snapshot(sid, nil)
	if err != nil || snap.ApprovalMode != "manual" || snap.Sandbox.Mode != "workspace-write" {
		t.Fatalf("before: %+v %v", snap, err)
	}
	info, err := call(t, d.daemonInfo, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	want := d.cfg.Model.Default + ",other-model" // the default first, then the choices, once each
	if got := info.(protocol.DaemonInfo); strings.Join(got.Models, ",") != want || got.ApprovalMode != "manual" {
		t.Fatalf("daemon.info models %q approval_mode %q; want %q and manual", got.Models, got.ApprovalMode, want)
	}
	if _, err := call(t, d.sessionUpdate, map[string]any{"session_id": sid, "model": "other-model", "approval_mode": "strict",
		"sandbox": map[string]any{"mode": "read-only"}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]any{
		{"session_id": sid, "sandbox": map[string]any{"mode": "workspace-write"}},
		{"session_id": sid, "sandbox": map[string]any{"network": true}},
		{"session_id": sid, "sandbox": map[string]any{"mode": "off"}},
		{"session_id": sid, "approval_mode": "never"},
		{"session_id": sid, "model": " "},
		{"session_id": sid, "model": "a\x1bb"},
	} {
		_, err := call(t, d.sessionUpdate, bad)
		wantWire(t, err, protocol.ReasonInvalidParams)
	}
	check := func(d *Daemon, when string) {
		t.Helper()
		snap, err := d.snapshot(sid, nil)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Model != "other-model" || snap.ApprovalMode != "strict" || snap.Sandbox.Mode != "read-only" || snap.Sandbox.Network {
			t.Fatalf("%s: model %q approval_mode %q sandbox %+v; want other-model, strict, read-only without network", when, snap.Model, snap.ApprovalMode, snap.Sandbox)
		}
	}
	check(d, "after session.update")
	home := d.home
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	d2, err := Start(context.Background(), Options{Home: home, Logger: d.log})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Stop(ctx)
	check(d2, "after a restart")
}
