package journeys

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/fixtures"
)

// scrape GETs a /metrics URL (with the token when not empty) and returns
// the samples by their printed name and labels, e.g.
// `sessiond_turns_total{outcome="completed"}`.
func scrape(t testing.TB, url, token string) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsAndAuditLog drives a daemon through every kind of event an
// operator watches (a completed turn, an approved command, a queued input,
// a model server error, a crash that leaves a session held, its
// resolution) and checks that each metric of docs/operations.md moves, that
// /metrics wants the token like /rpc (and metrics_listen does not), that
// each transition has its audit line, and that neither the token nor the
// API key ever appears in the log.
func TestMetricsAndAuditLog(t *testing.T) {
	const apiKey = "sk-test-4f9d0c2b7a1e-never-log-me"
	m := fixtures.NewFakeModel(t)
	m.On("hello", fixtures.Reply{Text: "hi there"})
	m.On("delete the victim", ctlTerminalCall("rm -rf ./victim && echo removed-it"), fixtures.Reply{Text: "The victim is gone."})
	m.On("fail please", fixtures.Reply{Status: 500, Text: `{"error":{"message":"the fake model broke","type":"server_error"}}`})
	crash := fixtures.NewGate()
	m.On("crash story", fixtures.Reply{Text: "never finished", StreamGate: crash})
	mport := freePort(t)
	cfg := fmt.Sprintf("model: {provider: openai, default: %s, base_url: %q, api_key: %q}\napprovals: {mode: manual}\nmetrics_listen: 127.0.0.1:%d\n",
		fixtures.FakeModelName, m.URL(), apiKey, mport)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: cfg, Args: []string{"--log-level", "debug"}})
	base := strings.TrimSuffix(strings.Replace(d.Desc.URL, "ws://", "http://", 1), "/rpc")
	metricsURL := base + "/metrics"
	tokens := []string{d.Desc.Token}

	// The token is required on the main listener, not on metrics_listen.
	for _, auth := range []string{"", "Bearer wrong"} {
		req, _ := http.NewRequest("GET", metricsURL, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /metrics with %q: %s, want 401", auth, resp.Status)
		}
	}
	open := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", mport), "")
	if _, ok := open["go_goroutines"]; !ok {
		t.Fatalf("metrics_listen lacks the Go runtime metrics: %v", open)
	}
	before := scrape(t, metricsURL, d.Desc.Token)
	if before["sessiond_connections"] != 0 || before["sessiond_state_readable"] != 1 {
		t.Fatalf("at start: connections %v, state_readable %v", before["sessiond_connections"], before["sessiond_state_readable"])
	}

	c := d.Dial(t)
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "victim"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, c, map[string]any{"cwd": cwd}).SessionID
	resume(t, c, s)
	hello := submit(t, c, s, "hello-1", "hello")
	ctlWaitTurn(t, c, hello.AdmissionID)

	// An approval waits; an input queues behind it.
	del := submit(t, c, s, "del-1", "delete the victim")
	pid := ctlWaitPrompt(t, c, del.AdmissionID)
	behind := submit(t, c, s, "fail-1", "fail please")
	during := scrape(t, metricsURL, d.Desc.Token)
	for name, want := range map[string]float64{"sessiond_open_prompts": 1, "sessiond_queued_admissions": 1, "sessiond_connections": 1} {
		if during[name] != want {
			t.Errorf("%s = %v while the approval waits, want %v", name, during[name], want)
		}
	}
	ctlWant(t, ctl(t, d.Home, "", "approve", s, pid, "--choice", "once"), 0)
	ctlWaitTurn(t, c, del.AdmissionID)
	ctlWaitTurn(t, c, behind.AdmissionID)
	after := scrape(t, metricsURL, d.Desc.Token)
	moved := func(name string) {
		t.Helper()
		if after[name] <= before[name] {
			t.Errorf("%s did not move: %v before, %v after", name, before[name], after[name])
		}
	}
	for _, name := range []string{
		`sessiond_admissions_total{outcome="completed"}`, `sessiond_admissions_total{outcome="failed"}`,
		`sessiond_turns_total{outcome="completed"}`, `sessiond_turns_total{outcome="failed"}`,
		"sessiond_turn_duration_seconds_count", "sessiond_prompt_submit_seconds_count",
		`sessiond_tool_commands_total{result="ok"}`,
		`sessiond_model_requests_total{status="200"}`, `sessiond_model_requests_total{status="500"}`,
		"sessiond_store_commit_seconds_count", "sessiond_store_transactions_total", "sessiond_store_statements_total",
	} {
		moved(name)
	}
	// The Go and process collectors are gauges: whether they rose between the
	// scrapes depends on the moment (CI once saw 21 goroutines at both), so
	// they need only be there.
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if after[name] <= 0 {
			t.Errorf("%s = %v, want a positive gauge", name, after[name])
		}
	}
	if r, ok := after["sessiond_store_transaction_reruns_total"]; !ok || r != 0 {
		t.Errorf("sessiond_store_transaction_reruns_total = %v (present %v), want 0 on SQLite", r, ok)
	}
	if after["sessiond_open_prompts"] != 0 || after["sessiond_queued_admissions"] != 0 {
		t.Errorf("after the turns: open_prompts %v, queued %v", after["sessiond_open_prompts"], after["sessiond_queued_admissions"])
	}

	// A crash mid-turn leaves the session held until it is resolved.
	story := submit(t, c, s, "crash-1", "crash story")
	<-crash.Waiting()
	d.SIGKILL(t)
	d.Restart(t)
	tokens = append(tokens, d.Desc.Token)
	base = strings.TrimSuffix(strings.Replace(d.Desc.URL, "ws://", "http://", 1), "/rpc")
	metricsURL = base + "/metrics"
	if held := scrape(t, metricsURL, d.Desc.Token)["sessiond_held_sessions"]; held != 1 {
		t.Fatalf("sessiond_held_sessions = %v after the crash, want 1", held)
	}
	c = d.Dial(t)
	snap := resume(t, c, s)
	var storyGen int64
	for _, p := range snap.Pending {
		if p.AdmissionID == story.AdmissionID && p.ExecutionGeneration != nil {
			storyGen = *p.ExecutionGeneration
		}
	}
	if err := c.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": s, "admission_id": story.AdmissionID, "execution_generation": storyGen}, nil); err != nil {
		t.Fatal(err)
	}
	resolved := scrape(t, metricsURL, d.Desc.Token)
	if resolved["sessiond_held_sessions"] != 0 || resolved[`sessiond_admissions_total{outcome="interrupted"}`] != 1 {
		t.Fatalf("after resolve: held %v, interrupted admissions %v", resolved["sessiond_held_sessions"], resolved[`sessiond_admissions_total{outcome="interrupted"}`])
	}

	// The audit log: one line per transition, and no secret anywhere.
	logs := d.AllStderr()
	for _, want := range []string{
		`msg="session created" audit=true conn=`,
		`msg="admission admitted" audit=true session_id=` + s + ` admission_id=` + hello.AdmissionID,
		`msg="admission started" audit=true session_id=` + s + ` admission_id=` + hello.AdmissionID,
		`msg="admission settled" audit=true session_id=` + s + ` admission_id=` + hello.AdmissionID + ` execution_generation=1 outcome=completed`,
		`msg="prompt opened" audit=true session_id=` + s,
		`command="rm -rf ./victim && echo removed-it"`,
		`msg="prompt answered" audit=true conn=`, `choice=once`,
		`msg="tool command started" audit=true`, `cwd=` + slogValue(cwd),
		`msg="tool command ended" audit=true`, `result=ok exit_code=0 duration_ms=`, `bytes=11`,
		`msg="model request failed" audit=true server=` + m.URL() + `/chat/completions status=500`,
		`outcome=failed error=`,
		`admission left started by an earlier daemon is now unknown`,
		`msg="an unknown admission was resolved by a client`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	for _, secret := range append(tokens, apiKey) {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds a secret (%.8s…)", secret)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
}

// slogValue is s as slog's text handler prints a value: quoted when it
// holds a space, a quote, '=' or a control character.
func slogValue(s string) string {
	if strings.ContainsAny(s, " \"=\t\n") {
		return strconv.Quote(s)
	}
	return s
}
