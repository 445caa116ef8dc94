package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
)

func TestSessionRows(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	req := sql.NullString{String: "req-1", Valid: true}
	if err := db.InTx(ctx, func(tx *Tx) error {
		if err := InsertSession(tx, NewSession{SessionID: "s1", Title: "one", Cwd: "/tmp", Model: "m", Provider: "openai",
			BaseURL: "http://x", Toolsets: `["terminal","clarify"]`, Source: "cli", CreateRequestID: req,
			CreateDigest: sql.NullString{String: "dig", Valid: true}, CreatedAt: Now(),
			Sandbox: sql.NullString{String: `{"mode":"read-only"}`, Valid: true}, PinLabel: sql.NullString{String: "hostA", Valid: true}}); err != nil {
			return err
		}
		return InsertSession(tx, NewSession{SessionID: "s2", Cwd: "/tmp", Model: "m", Provider: "openai", Toolsets: `[]`, CreatedAt: Now()})
	}); err != nil {
		t.Fatal(err)
	}
	s, err := GetSession(db.Reads(ctx), "s1")
	if err != nil || s.Title != "one" || s.Source != "cli" || s.CreateDigest.String != "dig" || s.Sandbox.String != `{"mode":"read-only"}` ||
		s.ExecutionGeneration != 0 || s.NextAdmissionSeq != 1 || !slices.Equal(s.ToolsetNames(), []string{"terminal", "clarify"}) {
		t.Fatalf("GetSession(s1) = %+v, %v", s, err)
	}
	var pin string
	if err := db.Get(ctx, &pin, `SELECT pin_label FROM sessions WHERE session_id = 's1'`); err != nil || pin != "hostA" {
		t.Fatalf("pin_label = %q, %v", pin, err)
	}
	if s, err := GetSession(db.Reads(ctx), "s2"); err != nil || s.CreateRequestID.Valid || s.Sandbox.Valid || s.ToolsetNames() == nil {
		t.Fatalf("GetSession(s2) = %+v, %v", s, err)
	}
	if _, err := GetSession(db.Reads(ctx), "nope"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("GetSession(nope): %v, want sql.ErrNoRows", err)
	}
	if s, err := SessionByCreateRequest(db.Reads(ctx), "req-1"); err != nil || s.SessionID != "s1" {
		t.Fatalf("SessionByCreateRequest = %+v, %v", s, err)
	}
	if _, err := SessionByCreateRequest(db.Reads(ctx), "req-2"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("SessionByCreateRequest(req-2): %v, want sql.ErrNoRows", err)
	}
	if err := db.InTx(ctx, func(tx *Tx) error { return RenameSession(tx, "s1", "renamed") }); err != nil {
		t.Fatal(err)
	}
	if s, err := GetSession(db.Reads(ctx), "s1"); err != nil || s.Title != "renamed" {
		t.Fatalf("after the rename: %+v, %v", s, err)
	}
}
