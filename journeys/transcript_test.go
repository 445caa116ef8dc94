package journeys

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// TestTranscriptSurvivesSIGKILL is journey 3 of issue 5: a committed turn's
// reply is part of the next request after a crash and a restart, and it
// comes from the store, not from anywhere else (a fresh home never sends
// it).
func TestTranscriptSurvivesSIGKILL(t *testing.T) {
	marker := fmt.Sprintf("zebra-%d-violet", time.Now().UnixNano())
	const (
		turn1 = "remember the code word"
		turn2 = "what was the code word?"
	)
	reply1 := "The code word is " + marker + "."
	m := fixtures.NewFakeModel(t)
	m.On(turn1, fixtures.Reply{Text: reply1})
	m.On(turn2, fixtures.Reply{Text: "I remember it."})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	c := d.Dial(t)
	sid := createSession(t, c, map[string]any{}).SessionID

	r1 := submit(t, c, sid, "turn-1", turn1)
	// turn.completed is published only after the settle committed.
	if out := waitTurn(t, c, r1.AdmissionID); out != "completed" {
		t.Fatalf("turn 1 outcome %q", out)
	}
	var stored int
	if err := db.Get(&stored, `SELECT count(*) FROM messages WHERE session_id = ? AND role = 'assistant' AND content = ?`, sid, reply1); err != nil {
		t.Fatal(err)
	}
	if stored != 1 {
		t.Fatalf("the store holds %d copies of turn 1's reply before the kill, want 1", stored)
	}
	if reqs := m.Requests(); len(reqs) != 1 || bytes.Contains(reqs[0].Raw, []byte(marker)) {
		t.Fatalf("turn 1: %d requests (the marker must only come from the model's reply)", len(reqs))
	}

	d.SIGKILL(t)
	d.Restart(t)
	c = d.Dial(t)
	snap := resume(t, c, sid)
	if len(snap.Messages) != 2 || snap.Messages[1].Role != "assistant" || snap.Messages[1].Content != reply1 {
		t.Fatalf("transcript after the restart = %+v", snap.Messages)
	}
	r2 := submit(t, c, sid, "turn-2", turn2)
	if out := waitTurn(t, c, r2.AdmissionID); out != "completed" {
		t.Fatalf("turn 2 outcome %q", out)
	}
	reqs := m.RequestsWithLastUser(turn2)
	if len(reqs) != 1 {
		t.Fatalf("turn 2 reached the model %d times, want 1", len(reqs))
	}
	req := reqs[0]
	var roles []string
	for _, msg := range req.Messages {
		roles = append(roles, msg.Role)
	}
	if !slices.Equal(roles, []string{"system", "user", "assistant", "user"}) || !slices.Equal(req.UserTexts, []string{turn1, turn2}) {
		t.Fatalf("turn 2's request: roles %v, user texts %q; want system, turn 1, its reply, turn 2", roles, req.UserTexts)
	}
	if got, _ := req.Messages[2].Content.(string); got != reply1 {
		t.Fatalf("turn 2's request carries the reply %q, want %q", got, reply1)
	}
	if !bytes.Contains(req.Raw, []byte(marker)) {
		t.Fatalf("turn 2's request does not contain the marker %s", marker)
	}

	// Negative control: the same question on a fresh home never carries
	// the marker.
	fresh := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	fc := fresh.Dial(t)
	fsid := createSession(t, fc, map[string]any{}).SessionID
	fr := submit(t, fc, fsid, "turn-2", turn2)
	if out := waitTurn(t, fc, fr.AdmissionID); out != "completed" {
		t.Fatalf("fresh home: outcome %q", out)
	}
	reqs = m.RequestsWithLastUser(turn2)
	if len(reqs) != 2 {
		t.Fatalf("fresh home: %d requests for turn 2 in all, want 2", len(reqs))
	}
	if ctl := reqs[1]; bytes.Contains(ctl.Raw, []byte(marker)) || !slices.Equal(ctl.UserTexts, []string{turn2}) || len(ctl.Messages) != 2 {
		t.Fatalf("fresh home's first request carries %d messages, user texts %q, marker %v; want [system, turn 2] and no marker",
			len(ctl.Messages), ctl.UserTexts, bytes.Contains(ctl.Raw, []byte(marker)))
	}
}
