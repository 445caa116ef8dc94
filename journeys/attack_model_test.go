package journeys

// Adversarial regression: a 500 or a gateway's 502/504 may come after the
// upstream processed the request, so the daemon must not send the input
// again (docs/protocol.md E2); 429 and 503 say the request was not taken and
// are retried (at most twice).

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

func TestAttackModelRetryDuplicatesInput(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	failure := func(status int) fixtures.Reply {
		return fixtures.Reply{Status: status, Text: `{"error":{"message":"upstream timed out","type":"server_error"}}`}
	}
	// A second reply that would answer a retry: it must never be served.
	for _, st := range []int{500, 502, 504} {
		m.On(fmt.Sprintf("status %d", st), failure(st), fixtures.Reply{Text: "second attempt answered"})
	}
	// The last reply repeats: every attempt gets the status.
	for _, st := range []int{503, 429} {
		m.On(fmt.Sprintf("always %d", st), failure(st))
	}
	m.On("503 once", failure(503), fixtures.Reply{Text: "second attempt answered"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)

	cases := []struct {
		text, status string
		outcome      string
		requests     int
	}{
		{"status 500", "500", "failed", 1},
		{"status 502", "502", "failed", 1},
		{"status 504", "504", "failed", 1},
		{"always 503", "503", "failed", 3}, // the first attempt and two retries
		{"always 429", "429", "failed", 3},
		{"503 once", "503", "completed", 2},
	}
	admissions := map[string]string{} // admission id -> text
	for i, tc := range cases {
		r := submit(t, c, s.SessionID, fmt.Sprint("retry-", i), tc.text)
		admissions[r.AdmissionID] = tc.text
		out, errText := trTurnEnd(t, c, r.AdmissionID)
		n := len(m.RequestsWithLastUser(tc.text))
		if out != tc.outcome || n != tc.requests {
			t.Errorf("%s: outcome %s (%s), the input reached the model %d times; want %s after %d", tc.text, out, errText, n, tc.outcome, tc.requests)
		}
		if out == "failed" && !strings.Contains(errText, tc.status) {
			t.Errorf("%s: the error %q does not name the status", tc.text, errText)
		}
	}
	// Only the 503 that was retried has the second reply in its transcript.
	for _, msg := range resume(t, d.Dial(t), s.SessionID).Messages {
		if text := admissions[msg.AdmissionID]; msg.Content == "second attempt answered" && text != "503 once" {
			t.Errorf("%s: the reply to a retry reached the transcript", text)
		}
	}
}
