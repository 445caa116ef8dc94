package journeys

// Helpers of the adversarial regression journeys (attack_*_test.go). Every
// name starts with "atk" so nothing collides with the other journey files.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// atkSeed returns the seed of a randomised journey: ATTACK_SEED when set
// (to replay a failure), else the clock. It is logged so that a failing run
// can be replayed.
func atkSeed(t *testing.T) *rand.Rand {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv("ATTACK_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ATTACK_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("ATTACK_SEED=%d (set it to replay this run)", seed)
	return rand.New(rand.NewSource(seed))
}

// atkSpin busy-waits for d. It is jitter to shift one side of a race by a
// few microseconds, never synchronisation.
func atkSpin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// atkCountLines returns the number of lines in path (0 when it is absent).
func atkCountLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// atkRawReply sends frame verbatim on c and returns the unmatched reply it
// gets (the reply to a hand-made frame).
func atkRawReply(t *testing.T, c *fixtures.Client, frame string) map[string]any {
	t.Helper()
	if err := c.SendText(ctxT(t), frame); err != nil {
		t.Fatalf("send: %v", err)
	}
	raw, err := c.ReadRawResponse(ctxT(t))
	if err != nil {
		t.Fatalf("no reply to %.80q: %v (close %d)", frame, err, c.CloseStatus())
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("reply %q is not a JSON object", raw)
	}
	return m
}

// atkErrCode returns the error code and error.data.reason of a reply (0, ""
// when it is not an error).
func atkErrCode(m map[string]any) (float64, string) {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0, ""
	}
	d, _ := e["data"].(map[string]any)
	r, _ := d["reason"].(string)
	code, _ := e["code"].(float64)
	return code, r
}

// atkAlive asserts that c still answers requests.
func atkAlive(t *testing.T, c *fixtures.Client) {
	t.Helper()
	if err := c.Call(ctxT(t), "daemon.info", nil, nil); err != nil {
		t.Fatalf("connection no longer usable: %v", err)
	}
}

// atkRawUpgrade sends a hand-written WebSocket upgrade for target (e.g.
// "/rpc") to addr with the Host header host and the extra headers hdr, and
// returns the HTTP status code (-1 when no response could be read).
func atkRawUpgrade(t *testing.T, addr, target, host string, hdr [][2]string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", target, host)
	for _, kv := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", kv[0], kv[1])
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return -1, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Status
}

// atkTerm is a terminal tool call with a fresh id.
func atkTerm(command string) fixtures.FakeToolCall {
	return fixtures.FakeToolCall{Name: "terminal", Arguments: jsonArgs(map[string]string{"command": command})}
}

// atkCall is Call with its own deadline, safe to use from any goroutine (it
// never calls t.Fatal).
func atkCall(c *fixtures.Client, method string, params map[string]any, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return c.Call(ctx, method, params, result)
}

// atkWaitParked is waitParked that adds diag() to the failure message.
func atkWaitParked(t *testing.T, g *fixtures.Gate, what string, diag func() string) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-g.Waiting():
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s to reach the model; %s", wait, what, diag())
	}
}

// atkWaitTurn waits (at most timeout) for turn.completed of admissionID on c
// and returns its outcome. On timeout it fails with what the store holds:
// the admission row, its prompts, and the stored events c did not receive.
func atkWaitTurn(t *testing.T, c *fixtures.Client, d *fixtures.Daemon, sessionID, admissionID string, timeout time.Duration) string {
	t.Helper()
	var outcome string
	found := fixtures.Poll(timeout, func() bool {
		for _, e := range c.Events() {
			if e.Type == "turn.completed" && e.AdmissionID == admissionID {
				var p struct {
					Outcome string `json:"outcome"`
				}
				json.Unmarshal(e.Payload, &p)
				outcome = p.Outcome
				return true
			}
		}
		select {
		case <-c.Done():
			t.Fatalf("connection closed while waiting for turn.completed of %s: %v", admissionID, c.Err())
		default:
		}
		return false
	})
	if found {
		return outcome
	}
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	defer db.Close()
	row := admissionRow(t, fixtures.Admissions(t, db, sessionID), admissionID)
	var open []string
	db.Select(&open, `SELECT prompt_id || ' ' || status || ' ' || COALESCE(resolution, '') FROM prompts WHERE admission_id = ?`, admissionID)
	received := maxSeq(durableEvents(c.Events(), sessionID), 0)
	snap := resume(t, d.Dial(t), sessionID)
	running := "nothing"
	if snap.Running != nil {
		running = *snap.Running
	}
	var pending []string
	for _, p := range snap.Pending {
		pending = append(pending, p.InputID+":"+p.Status+"/"+p.Reason)
	}
	t.Fatalf("no turn.completed for %s within %v; the store says %s/%s (generation %d); prompts %q; "+
		"stored events the client did not get: %v; the session runs %s, pending %v",
		admissionID, timeout, row.Status, row.Outcome.String, row.ExecutionGeneration.Int64, open,
		storedEventsAfter(t, db, sessionID, received), running, pending)
	return ""
}

// atkBusyWriters starts n clients that call session.create in a loop (each
// a write transaction) to keep the daemon's group commit and CPUs busy. The
// returned function stops them and reports their errors; it is also run at
// cleanup.
func atkBusyWriters(t *testing.T, d *fixtures.Daemon, n int) (stop func()) {
	t.Helper()
	cwd := t.TempDir()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for g := range n {
		bc := d.Dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if err := atkCall(bc, "session.create", map[string]any{"cwd": cwd, "request_id": fmt.Sprintf("busy-%d-%d", g, i)}, nil); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			for _, err := range errs {
				t.Errorf("background session.create: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
