package journeys

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
)

// TestBigTranscriptStaysResumable: a session with a 117 MiB transcript
// (1,200 messages of 100 KiB, more than a frame may carry) stays resumable:
// session.resume returns the newest messages within the bounds, says older
// ones were left out, cuts long contents and marks them; session.messages
// pages back through every message, whole, in order.
func TestBigTranscriptStaysResumable(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.On("hello", fixtures.Reply{Text: "hi"})
	d, c, sid, _ := quirkSession(t, m, "")
	wantTurn(t, c, sid, "i1", "hello", "completed")
	db, err := sqlx.Open("sqlite", "file:"+filepath.Join(d.Home, "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n, size = 1200, 102400
	if _, err := db.Exec(`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
		INSERT INTO messages (session_id, role, content, created_at)
		SELECT ?, 'user', printf('%06d', i) || substr(replace(hex(zeroblob(?)), '00', 'ab'), 7), '2026-01-01T00:00:00.000Z' FROM k`,
		n, sid, size/2); err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Messages          []protocol.Message `json:"messages"`
		MessagesTruncated bool               `json:"messages_truncated"`
		LastSeq           int64              `json:"last_seq"`
	}
	if err := c.Call(context.Background(), "session.resume", map[string]any{"session_id": sid}, &snap); err != nil {
		t.Fatalf("resume of a big session: %v", err)
	}
	total := 0
	for _, msg := range snap.Messages {
		total += len(msg.Content)
		if len(msg.Content) == size && !msg.Truncated || len(msg.Content) > protocol.MaxSnapshotTextBytes {
			t.Fatalf("message %d: %d bytes, truncated %v", msg.ID, len(msg.Content), msg.Truncated)
		}
	}
	if !snap.MessagesTruncated || len(snap.Messages) == 0 || len(snap.Messages) > protocol.MaxSnapshotMessages ||
		total > protocol.MaxSnapshotBytes+protocol.MaxSnapshotTextBytes {
		t.Fatalf("snapshot: %d messages, %d bytes, truncated %v", len(snap.Messages), total, snap.MessagesTruncated)
	}
	newest := snap.Messages[len(snap.Messages)-1]
	if newest.Content[:6] != "001200" || !newest.Truncated {
		t.Fatalf("the snapshot does not end with the newest message: %.20q", newest.Content)
	}
	// Page back from the snapshot's oldest message to the first.
	var all []protocol.Message
	before := snap.Messages[0].ID
	for pages := 0; ; pages++ {
		var page protocol.MessagesResult
		if err := c.Call(context.Background(), "session.messages", map[string]any{"session_id": sid, "before_id": before}, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) == 0 || pages > n {
			t.Fatalf("page %d is empty (has_more %v)", pages, page.HasMore)
		}
		all = append(page.Messages, all...)
		before = page.Messages[0].ID
		if !page.HasMore {
			break
		}
	}
	all = append(all, snap.Messages...)
	// The first turn's two messages (user, assistant) come first.
	for i, msg := range all {
		if i > 0 && msg.ID <= all[i-1].ID {
			t.Fatalf("ids out of order at %d", i)
		}
	}
	if len(all) != n+2 || all[0].Content != "hello" {
		t.Fatalf("paged %d messages, want %d", len(all), n+2)
	}
	for _, msg := range all[2 : len(all)-len(snap.Messages)] {
		if len(msg.Content) != size || msg.Truncated {
			t.Fatalf("paged message %d: %d bytes, truncated %v", msg.ID, len(msg.Content), msg.Truncated)
		}
	}
	// Bad params name the field.
	err = c.Call(context.Background(), "session.messages", map[string]any{"session_id": sid, "before_id": 0}, nil)
	if fixtures.ErrorReason(err) != "invalid_params" {
		t.Fatalf("before_id 0: %v", err)
	}
}
