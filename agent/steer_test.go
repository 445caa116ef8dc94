package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/model"
)

// fakeSteering hands out the steers queued by steer at the next Take, and
// records how many Takes ran.
type fakeSteering struct {
	mu     sync.Mutex
	queued []Stored
	takes  int
	err    error
}

func (f *fakeSteering) steer(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued = append(f.queued, Stored{Role: "user", Content: text})
}

func (f *fakeSteering) Take(ctx context.Context, t Turn) ([]Stored, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes++
	if f.err != nil {
		return nil, f.err
	}
	out := f.queued
	f.queued = nil
	return out, nil
}

func roles(msgs []model.Message) string {
	var rs []string
	for _, m := range msgs {
		rs = append(rs, m.Role)
	}
	return strings.Join(rs, ",")
}

// A steer queued while a command runs joins the next request, after the
// tool result, once; every request is preceded by a Take.
func TestRunSteerJoinsTheNextRequestAfterTheToolResults(t *testing.T) {
	st := &fakeSteering{}
	h := newHarness(t, "off",
		func(req model.Request) (*model.Response, error) {
			st.steer("also check the tests") // arrives while the tool call is served
			return &model.Response{ToolCalls: []model.ToolCall{term("c1", "echo one")}, FinishReason: "tool_calls"}, nil
		},
		says("done, tests too"))
	h.r.Steering = st
	wantCompleted(t, h.run(t))
	reqs := h.m.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if got := roles(reqs[1].Messages); got != "system,user,assistant,tool,user" {
		t.Fatalf("second request roles %s, want the steer after the tool result", got)
	}
	if last := reqs[1].Messages[4]; last.Content != "also check the tests" {
		t.Fatalf("last message %+v", last)
	}
	for _, m := range reqs[0].Messages {
		if m.Content == "also check the tests" {
			t.Fatal("the steer reached the first request")
		}
	}
	if st.takes != 2 {
		t.Fatalf("%d Takes for 2 requests", st.takes)
	}
}

// A Take that fails (the store, or the fence) fails the turn with the
// reason; nothing more is sent.
func TestRunSteerTakeFailureFailsTheTurn(t *testing.T) {
	st := &fakeSteering{err: errors.New("store unavailable")}
	h := newHarness(t, "off", says("never"))
	h.r.Steering = st
	res := h.run(t)
	if res.Outcome != "failed" || !strings.Contains(res.Error, "take steered input: store unavailable") {
		t.Fatalf("result %+v", res)
	}
	if n := len(h.m.requests()); n != 0 {
		t.Fatalf("%d requests after a failed Take", n)
	}
}

// Without Steering the loop is unchanged.
func TestRunWithoutSteering(t *testing.T) {
	h := newHarness(t, "off", says("hi"))
	wantCompleted(t, h.run(t))
	if got := roles(h.m.requests()[0].Messages); !slices.Contains([]string{"system,user"}, got) {
		t.Fatalf("roles %s", got)
	}
}
