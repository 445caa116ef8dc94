package journeys

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/fixtures"
)

// MCP servers in sessions (PROTOCOL.md 10.1) on the real binary, with the
// test server fixtures/mcpserver (written with the same SDK): each journey
// copies it into the session's cwd (the sandbox shows the cwd, not the
// harness's build directory) and reads its event log (one JSON line per
// start, call, cancellation and elicitation) to count exactly what reached
// the server.

// mcpFixture copies the test server into dir/bin and returns its path and
// the path of its event log.
func mcpFixture(t *testing.T, dir string) (bin, logf string) {
	t.Helper()
	src := fixtures.BuildBinary(t, "./fixtures/mcpserver")
	bin = filepath.Join(dir, "bin", "mcpserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin, filepath.Join(dir, "events.jsonl")
}

// mcpEvents reads the fixture's event log.
func mcpEvents(t *testing.T, logf string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(logf)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("fixture log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// mcpCount counts the fixture's events of kind event (and tool, if given).
func mcpCount(t *testing.T, logf, event, tool string) int {
	n := 0
	for _, e := range mcpEvents(t, logf) {
		if e["event"] == event && (tool == "" || e["tool"] == tool) {
			n++
		}
	}
	return n
}

func waitMCPCount(t *testing.T, logf, event, tool string, n int) {
	t.Helper()
	fixtures.Eventually(t, wait, fmt.Sprintf("%d %s %s event(s) at the MCP server", n, event, tool), func() bool {
		return mcpCount(t, logf, event, tool) >= n
	})
}

// mcpConfig is config.yaml's mcp section with the fixture as server fx.
func mcpConfig(bin, logf, extra string) string {
	return fmt.Sprintf("mcp:\n  servers:\n    fx: {command: %q, args: [\"-log\", %q]%s}\n", bin, logf, extra)
}

type mcpStatus struct {
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Error  string   `json:"error"`
	Tools  []string `json:"tools"`
	Source string   `json:"source"`
}

func mcpServers(t *testing.T, c *fixtures.Client, sessionID string) []mcpStatus {
	t.Helper()
	var s struct {
		MCPServers []mcpStatus `json:"mcp_servers"`
	}
	if err := c.Call(ctxT(t), "session.resume", map[string]any{"session_id": sessionID}, &s); err != nil {
		t.Fatal(err)
	}
	return s.MCPServers
}

// lastRequest is the last request the model got for text.
func lastRequest(t *testing.T, m *fixtures.FakeModel, text string) fixtures.RecordedRequest {
	t.Helper()
	reqs := m.RequestsWithLastUser(text)
	if len(reqs) == 0 {
		t.Fatalf("no request for %q", text)
	}
	return reqs[len(reqs)-1]
}

// lastResult is the last tool message the model got in its last request
// for text: the result of the turn's call.
func lastResult(m *fixtures.FakeModel, text string) []string {
	got := toolResults(m, text)
	if len(got) == 0 {
		return nil
	}
	return got[len(got)-1:]
}

// processesOf lists the pids whose command line starts with bin.
func processesOf(t *testing.T, bin string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.HasPrefix(string(b), bin+"\x00") {
			out = append(out, e.Name())
		}
	}
	return out
}

func hasTool(r fixtures.RecordedRequest, name string) bool {
	for _, n := range r.Tools {
		if n == name {
			return true
		}
	}
	return false
}

// List and call, and the approval gate: an auto_approve tool runs unasked;
// others ask with the MCP card; once asks again, session remembers
// mcp:fx/add for the session, always for every session, deny sends
// nothing.
func TestMCPListCallAndApprovals(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	call := func(text, tool, args string) {
		m.On(text, fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__"+tool, args)}}, fixtures.Reply{Text: "done: " + text})
	}
	call("echo it", "echo", `{"text":"hi"}`)
	call("add once", "add", `{"a":1,"b":2}`)
	call("add session", "add", `{"a":2,"b":2}`)
	call("add remembered", "add", `{"a":3,"b":2}`)
	call("slow denied", "slow", `{"seconds":0.01}`)
	call("image always", "image", `{}`)
	call("image elsewhere", "image", `{}`)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}\n"+mcpConfig(bin, logf, ", auto_approve: [echo]"))})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	if got := mcpServers(t, c, s.SessionID); len(got) != 1 || got[0].Name != "fx" || got[0].Status != "stopped" || got[0].Source != "config" {
		t.Fatalf("mcp_servers before the first turn: %+v", got)
	}
	resume(t, c, s.SessionID)

	r := submit(t, c, s.SessionID, "e1", "echo it")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	req := lastRequest(t, m, "echo it")
	if !hasTool(req, "mcp__fx__echo") || !hasTool(req, "mcp__fx__add") || !hasTool(req, "terminal") {
		t.Errorf("tools offered: %v", req.Tools)
	}
	if got := lastResult(m, "echo it"); len(got) != 1 || !strings.Contains(got[0], "echo: hi") || !strings.Contains(got[0], `"structured_content":{"echo":"hi"}`) {
		t.Fatalf("echo result: %v", got)
	}
	if n := mcpCount(t, logf, "call", "echo"); n != 1 {
		t.Fatalf("echo reached the server %d times", n)
	}
	c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.Type == "mcp.status" && strings.Contains(string(e.Payload), `"status":"ready"`) && e.Seq == nil
	})
	if got := mcpServers(t, c, s.SessionID); got[0].Status != "ready" || !strings.Contains(strings.Join(got[0].Tools, ","), "echo") {
		t.Fatalf("mcp_servers after the first turn: %+v", got)
	}
	// tool.running is durable, before the call, naming the server.
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	var running int
	if err := db.Get(&running, `SELECT count(*) FROM events WHERE session_id = ? AND type = 'tool.running' AND payload LIKE '%"mcp_server":"fx"%'`, s.SessionID); err != nil || running != 1 {
		t.Fatalf("tool.running events naming fx: %d (%v)", running, err)
	}

	// once: asked, runs; asked again next time.
	r = submit(t, c, s.SessionID, "a1", "add once")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	pl := promptPayload(t, c, p)
	if pl["kind"] != "mcp" || pl["server"] != "fx" || pl["tool"] != "add" || pl["pattern"] != "mcp:fx/add" || pl["command"] != "mcp__fx__add" {
		t.Fatalf("approval payload %v", pl)
	}
	if args, _ := json.Marshal(pl["arguments"]); string(args) != `{"a":1,"b":2}` {
		t.Fatalf("approval arguments %s", args)
	}
	if mcpCount(t, logf, "call", "add") != 0 {
		t.Fatal("the call reached the server before approval")
	}
	if _, err := answerApproval(t, c, s.SessionID, p, "once"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if got := lastResult(m, "add once"); len(got) != 1 || !strings.Contains(got[0], `"text":"3"`) {
		t.Fatalf("add result %v", got)
	}
	r = submit(t, c, s.SessionID, "a2", "add session")
	p = waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := answerApproval(t, c, s.SessionID, p, "session"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	r = submit(t, c, s.SessionID, "a3", "add remembered")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if got := lastResult(m, "add remembered"); len(got) != 1 || !strings.Contains(got[0], `"text":"5"`) {
		t.Fatalf("remembered add result %v", got)
	}
	for _, e := range c.Events() {
		if e.Type == "prompt.opened" && e.AdmissionID == r.AdmissionID {
			t.Fatal("a call remembered for the session asked again")
		}
	}
	if n := mcpCount(t, logf, "call", "add"); n != 3 {
		t.Fatalf("add reached the server %d times, want 3", n)
	}

	// deny: nothing sent, the model told.
	r = submit(t, c, s.SessionID, "d1", "slow denied")
	p = waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := answerApproval(t, c, s.SessionID, p, "deny"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	if got := lastResult(m, "slow denied"); len(got) != 1 || !strings.Contains(got[0], "denied this call") {
		t.Fatalf("denied result %v", got)
	}
	if mcpCount(t, logf, "call", "slow") != 0 {
		t.Fatal("a denied call reached the server")
	}

	// always: stored, and another session does not ask.
	r = submit(t, c, s.SessionID, "i1", "image always")
	p = waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := answerApproval(t, c, s.SessionID, p, "always"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	if got := lastResult(m, "image always"); len(got) != 1 || !strings.Contains(got[0], `"type":"image"`) || !strings.Contains(got[0], `"mime_type":"image/png"`) {
		t.Fatalf("image result %v", got)
	}
	var always int
	if err := db.Get(&always, `SELECT count(*) FROM approval_allowlist WHERE pattern = 'mcp:fx/image'`); err != nil || always != 1 {
		t.Fatalf("approval_allowlist mcp:fx/image: %d %v", always, err)
	}
	s2 := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s2.SessionID)
	r = submit(t, c, s2.SessionID, "i2", "image elsewhere")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	for _, e := range c.Events() {
		if e.Type == "prompt.opened" && e.AdmissionID == r.AdmissionID {
			t.Fatal("an always-approved call asked in another session")
		}
	}
	if n := mcpCount(t, logf, "call", "image"); n != 2 {
		t.Fatalf("image reached the server %d times, want 2", n)
	}
}

// A daemon killed during a call: the admission is unknown, the call is
// never sent again (not at boot, not at the next turn), and the model is
// told it was running once the operator resolves the turn. The server (one
// that ignores the end of its input) dies with the daemon.
func TestMCPCrashDuringCallIsUnknownAndNeverResent(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	m.On("wait long", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__slow", `{"seconds":600}`)}}, fixtures.Reply{Text: "never"})
	m.On("after", fixtures.Reply{Text: "fine"})
	cfg := fmt.Sprintf("approvals: {mode: off}\nmcp:\n  servers:\n    fx: {command: %q, args: [\"-log\", %q, \"-mode\", linger]}\n", bin, logf)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, cfg)})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "w1", "wait long")
	waitMCPCount(t, logf, "call", "slow", 1)
	if len(processesOf(t, bin)) == 0 {
		t.Fatal("no process of the MCP server found in /proc")
	}
	d.SIGKILL(t)
	fixtures.Eventually(t, wait, "the MCP server to die with the daemon", func() bool { return len(processesOf(t, bin)) == 0 })
	d.Restart(t)
	c = d.Dial(t)
	snap := resume(t, c, s.SessionID)
	if len(snap.Pending) != 1 || snap.Pending[0].Status != "unknown" {
		t.Fatalf("pending after the crash: %+v", snap.Pending)
	}
	resolveUnknownAdmission(t, c, s.SessionID, r.AdmissionID, *snap.Pending[0].ExecutionGeneration)
	r2 := submit(t, c, s.SessionID, "w2", "after")
	if out := waitTurn(t, c, r2.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	got := lastResult(m, "after")
	if len(got) != 1 || !strings.Contains(got[0], "the daemon stopped while this command ran") {
		t.Fatalf("what the model was told of the lost call: %v", got)
	}
	// The next turn started the server again; the call was not re-sent.
	waitMCPCount(t, logf, "start", "", 2)
	if n := mcpCount(t, logf, "call", "slow"); n != 1 {
		t.Fatalf("the call reached the server %d times, want 1", n)
	}
	if len(m.RequestsWithLastUser("wait long")) != 1 {
		t.Fatalf("the lost input reached the model %d times", len(m.RequestsWithLastUser("wait long")))
	}
}

// session.interrupt during a call cancels it (notifications/cancelled
// reaches the server) and the model is told it was interrupted while
// running.
func TestMCPInterruptCancelsCall(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	m.On("wait long", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__slow", `{"seconds":600}`)}}, fixtures.Reply{Text: "never"})
	m.On("next", fixtures.Reply{Text: "fine"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\n"+mcpConfig(bin, logf, ""))})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "w1", "wait long")
	waitMCPCount(t, logf, "call", "slow", 1)
	var ir struct {
		Interrupted *string `json:"interrupted"`
	}
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID}, &ir); err != nil || ir.Interrupted == nil {
		t.Fatalf("interrupt: %+v %v", ir, err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "interrupted" {
		t.Fatalf("outcome %s", out)
	}
	waitMCPCount(t, logf, "cancelled", "slow", 1)
	r2 := submit(t, c, s.SessionID, "n1", "next")
	waitTurn(t, c, r2.AdmissionID)
	if got := lastResult(m, "next"); len(got) != 1 || !strings.Contains(got[0], "MCP call was cancelled") {
		t.Fatalf("what the model was told: %v", got)
	}
}

// Faults of a session-given server never fail the session: a server that
// exits at start or hangs in initialize is failed (its tools withdrawn,
// the model told), one that dies mid-call fails the call and is
// restarted, malformed frames, a 20 MB result (capped) and arguments
// violating the tool's schema (refused before sending).
func TestMCPFaults(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\nmcp: {start_timeout: 2}")})
	c := d.Dial(t)
	server := func(name, mode string) map[string]any {
		return map[string]any{"name": name, "command": bin, "args": []string{"-mode", mode, "-log", logf}}
	}
	s := createSession(t, c, map[string]any{"cwd": dir, "mcp_servers": []any{server("ok", "serve"), server("gone", "exit"),
		server("stuck", "hang-init"), server("noisy", "garbage")}})
	resume(t, c, s.SessionID)
	m.On("hello", fixtures.Reply{Text: "hi"})
	r := submit(t, c, s.SessionID, "h1", "hello")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	req := lastRequest(t, m, "hello")
	sys, _ := req.Messages[0].Content.(string)
	if !hasTool(req, "mcp__ok__echo") || hasTool(req, "mcp__gone__echo") || hasTool(req, "mcp__stuck__echo") {
		t.Errorf("tools offered: %v", req.Tools)
	}
	if !strings.Contains(sys, `MCP server "gone" is unavailable`) || !strings.Contains(sys, "exiting at start") ||
		!strings.Contains(sys, `MCP server "stuck" is unavailable`) {
		t.Errorf("the model was not told of the failed servers: %q", sys)
	}
	byName := map[string]mcpStatus{}
	for _, st := range mcpServers(t, c, s.SessionID) {
		byName[st.Name] = st
	}
	if st := byName["gone"]; st.Status == "ready" || st.Source != "session" {
		t.Errorf("gone: %+v", st)
	}
	if st := byName["stuck"]; st.Status == "ready" {
		t.Errorf("stuck: %+v", st)
	}
	if st := byName["noisy"]; st.Status == "ready" || !strings.Contains(st.Error, "invalid character") {
		t.Errorf("noisy (malformed frames at start): %+v", st)
	}

	// Died mid-call: the call fails (sent, effects unknown), the server is
	// restarted, the session goes on.
	m.On("die", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__ok__die", `{}`)}}, fixtures.Reply{Text: "it died"})
	r = submit(t, c, s.SessionID, "d1", "die")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if got := lastResult(m, "die"); len(got) != 1 || !strings.Contains(got[0], "did not complete") || !strings.Contains(got[0], "status 9") {
		t.Fatalf("die result %v", got)
	}
	// ok's starts are the fixture's start events with mode serve.
	waitReady := func(starts int) {
		fixtures.Eventually(t, wait, fmt.Sprintf("ok started %d times, ready", starts), func() bool {
			n := 0
			for _, e := range mcpEvents(t, logf) {
				if e["event"] == "start" && e["mode"] == "serve" {
					n++
				}
			}
			for _, st := range mcpServers(t, c, s.SessionID) {
				if st.Name == "ok" && st.Status == "ready" {
					return n >= starts
				}
			}
			return false
		})
	}
	waitReady(2)

	// A malformed frame in the middle of a call.
	m.On("garbage", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__ok__garbage", `{}`)}}, fixtures.Reply{Text: "ok"})
	r = submit(t, c, s.SessionID, "g1", "garbage")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if got := lastResult(m, "garbage"); len(got) != 1 || !strings.Contains(got[0], "did not complete") {
		t.Fatalf("after a malformed frame mid-call: %v", got)
	}
	waitReady(3)

	// 20 MB: capped like terminal output.
	m.On("big", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__ok__big", `{"bytes":20000000}`)}}, fixtures.Reply{Text: "big"})
	r = submit(t, c, s.SessionID, "b1", "big")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	got := lastResult(m, "big")
	if len(got) != 1 || len(got[0]) > 60000 || !strings.Contains(got[0], `"truncated":true`) || !strings.Contains(got[0], `"total_bytes":20000000`) ||
		!strings.Contains(got[0], "BEGIN") || !strings.Contains(got[0], "END") {
		t.Fatalf("big result (%d bytes): %.300s", len(got[0]), got[0])
	}

	// Arguments that violate the tool's schema never reach the server.
	m.On("bad add", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__ok__add", `{"a":"one","b":2,"c":3}`)}}, fixtures.Reply{Text: "bad"})
	r = submit(t, c, s.SessionID, "v1", "bad add")
	waitTurn(t, c, r.AdmissionID)
	if got := lastResult(m, "bad add"); len(got) != 1 || !strings.Contains(got[0], "invalid arguments") {
		t.Fatalf("schema violation result %v", got)
	}
	if n := mcpCount(t, logf, "call", "add"); n != 0 {
		t.Fatalf("an invalid call reached the server (%d)", n)
	}
	if !d.Running() {
		t.Fatal("the daemon died")
	}
}

// A sandboxed server cannot read the daemon's home (inside its cwd) nor
// open a TCP socket;
// a config server with network: true can (the network is its entry's).
func TestMCPSandboxedServer(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	// The daemon's home inside the session's cwd: in the server's view
	// unless the sandbox covers it.
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	cfg := fixtures.FakeModelConfig(m, "approvals: {mode: off}\n"+mcpConfig(bin, logf, "")+
		fmt.Sprintf("    net: {command: %q, args: [\"-log\", %q], network: true}\n", bin, logf))
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: cfg, Home: filepath.Join(dir, "home")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	addr := strings.TrimPrefix(strings.TrimSuffix(m.URL(), "/v1"), "http://")
	desc := filepath.Join(d.Home, "daemon.json")
	m.On("read home", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__readfile", jsonArgs(map[string]string{"path": desc}))}}, fixtures.Reply{Text: "x"})
	m.On("dial", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__dial", jsonArgs(map[string]string{"address": addr}))}}, fixtures.Reply{Text: "x"})
	m.On("dial net", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__net__dial", jsonArgs(map[string]string{"address": addr}))}}, fixtures.Reply{Text: "x"})
	for _, text := range []string{"read home", "dial", "dial net"} {
		r := submit(t, c, s.SessionID, strings.ReplaceAll(text, " ", "-"), text)
		if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
			t.Fatalf("%s: outcome %s", text, out)
		}
	}
	if got := lastResult(m, "read home"); len(got) != 1 || strings.Contains(got[0], d.Desc.Token) || !strings.Contains(got[0], "read error") {
		t.Fatalf("a sandboxed server read the daemon's descriptor: %v", got)
	}
	if got := lastResult(m, "dial"); len(got) != 1 || !strings.Contains(got[0], "dial error") {
		t.Fatalf("a sandboxed server without network opened a TCP socket: %v", got)
	}
	if got := lastResult(m, "dial net"); len(got) != 1 || !strings.Contains(got[0], "dial ok") {
		t.Fatalf("a server with network: true could not connect: %v", got)
	}
}

// An elicitation opens a clarify prompt of the turn; answered, the server
// gets the answer. After a crash the prompt is fenced (stale_generation)
// and the call is never sent again.
func TestMCPElicitationAsClarifyFencedAfterRestart(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	m.On("ask me", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__ask", `{"question":"Which colour?"}`)}}, fixtures.Reply{Text: "noted"})
	m.On("ask again", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__ask", `{"question":"Which size?"}`)}}, fixtures.Reply{Text: "never"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\n"+mcpConfig(bin, logf, ""))})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "q1", "ask me")
	p := waitPrompt(t, c, r.AdmissionID, "clarify")
	pl := promptPayload(t, c, p)
	if b, _ := json.Marshal(pl); !strings.Contains(string(b), "Which colour?") || !strings.Contains(string(b), `MCP server \"fx\" asks`) {
		t.Fatalf("clarify payload %s", b)
	}
	if _, err := answerClarify(t, c, s.SessionID, p, "blue"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if got := lastResult(m, "ask me"); len(got) != 1 || !strings.Contains(got[0], `accept {\"answer\":\"blue\"}`) {
		t.Fatalf("ask result %v", got)
	}

	r = submit(t, c, s.SessionID, "q2", "ask again")
	p = waitPrompt(t, c, r.AdmissionID, "clarify")
	d.SIGKILL(t)
	d.Restart(t)
	c = d.Dial(t)
	resume(t, c, s.SessionID)
	_, err := answerClarify(t, c, s.SessionID, p, "large")
	wantReason(t, err, -32000, "stale_generation")
	if n := mcpCount(t, logf, "call", "ask"); n != 2 {
		t.Fatalf("ask reached the server %d times, want 2", n)
	}
	for _, e := range mcpEvents(t, logf) {
		if e["event"] == "elicited" && strings.Contains(fmt.Sprint(e["content"]), "large") {
			t.Fatal("a fenced answer reached the server")
		}
	}
	_ = time.Second
}

// Bad mcp_servers get a clear invalid_params naming the field, and nothing
// is created.
func TestMCPCreateRefusesBadServers(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "mcp: {servers: {fx: {command: /bin/true}}}")})
	c := d.Dial(t)
	dir := t.TempDir()
	cases := []struct {
		server map[string]any
		field  string
	}{
		{map[string]any{"name": "a b", "command": "x"}, "mcp_servers[0].name"},
		{map[string]any{"name": "a__b", "command": "x"}, "mcp_servers[0].name"},
		{map[string]any{"name": "a"}, "mcp_servers[0]"},
		{map[string]any{"name": "a", "command": "x", "url": "http://127.0.0.1:1/mcp"}, "mcp_servers[0]"},
		{map[string]any{"name": "a", "command": "x", "network": true}, "mcp_servers[0].network"},
		{map[string]any{"name": "a", "command": "x", "auto_approve": []string{"t"}}, "mcp_servers[0].auto_approve"},
		{map[string]any{"name": "a", "url": "ftp://x"}, "mcp_servers[0].url"},
		{map[string]any{"name": "a", "url": "http://127.0.0.1:1/mcp"}, "mcp_servers[0].url"},
		{map[string]any{"name": "fx", "command": "x"}, "mcp_servers[0].name"},
		{map[string]any{"name": "a", "command": "x", "env": map[string]string{"1X": "y"}}, "mcp_servers[0].env"},
	}
	for _, tc := range cases {
		_, rerr, err := c.CallRaw(ctxT(t), "session.create", map[string]any{"cwd": dir, "mcp_servers": []any{tc.server}})
		if err != nil || rerr == nil {
			t.Fatalf("%v: accepted (%v)", tc.server, err)
		}
		if rerr.Reason() != "invalid_params" || rerr.Data["field"] != tc.field {
			t.Errorf("%v: %s %v, want invalid_params on %s", tc.server, rerr.Message, rerr.Data, tc.field)
		}
	}
	var list struct {
		Sessions []any `json:"sessions"`
	}
	if err := c.Call(ctxT(t), "session.list", map[string]any{}, &list); err != nil || len(list.Sessions) != 0 {
		t.Fatalf("sessions after refusals: %d %v", len(list.Sessions), err)
	}
}

// A session's servers stop when it has been idle for mcp.idle_timeout
// (mcp.status tells attached clients) and start again with its next turn.
func TestMCPIdleStopAndNextTurn(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	m.On("one", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__echo", `{"text":"1"}`)}}, fixtures.Reply{Text: "ok"})
	m.On("two", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__echo", `{"text":"2"}`)}}, fixtures.Reply{Text: "ok"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\n"+mcpConfig(bin, logf, "")+"  idle_timeout: 1\n")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "i1", "one")
	waitTurn(t, c, r.AdmissionID)
	c.WaitEvent(t, wait, func(e fixtures.Event) bool {
		return e.Type == "mcp.status" && strings.Contains(string(e.Payload), `"status":"stopped"`)
	})
	if got := mcpServers(t, c, s.SessionID); got[0].Status != "stopped" {
		t.Fatalf("after the idle timeout: %+v", got)
	}
	r = submit(t, c, s.SessionID, "i2", "two")
	waitTurn(t, c, r.AdmissionID)
	if got := lastResult(m, "two"); len(got) != 1 || !strings.Contains(got[0], "echo: 2") {
		t.Fatalf("second turn's result %v", got)
	}
	if n := mcpCount(t, logf, "start", ""); n != 2 {
		t.Fatalf("%d starts of the server, want 2", n)
	}
}

// The session's own approvals mode (session.update approval_mode, issue 26)
// gates MCP calls as it gates commands: with approvals off in config.yaml, a
// session switched to manual asks before the call, and nothing reaches the
// server before the answer.
func TestMCPSessionApprovalModeGatesCalls(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	m.On("add asked", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__fx__add", `{"a":1,"b":2}`)}}, fixtures.Reply{Text: "done"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\n"+mcpConfig(bin, logf, ""))})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir})
	if err := c.Call(ctxT(t), "session.update", map[string]any{"session_id": s.SessionID, "approval_mode": "manual"}, nil); err != nil {
		t.Fatal(err)
	}
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "m1", "add asked")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	if pl := promptPayload(t, c, p); pl["kind"] != "mcp" || pl["tool"] != "add" {
		t.Fatalf("approval payload %v", pl)
	}
	if n := mcpCount(t, logf, "call", "add"); n != 0 {
		t.Fatalf("the call reached the server %d times before approval", n)
	}
	if _, err := answerApproval(t, c, s.SessionID, p, "once"); err != nil {
		t.Fatal(err)
	}
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if n := mcpCount(t, logf, "call", "add"); n != 1 {
		t.Fatalf("add reached the server %d times, want 1", n)
	}
}

// A session-given server's env is the server's, never the sandbox
// helper's: LD_PRELOAD (or LD_LIBRARY_PATH, LD_AUDIT...) in it must not
// load code into the helper, which runs before any confinement with the
// daemon's rights. The preloaded library writes a mark into the daemon's
// home when it can; the server still sees its env (its /proc/self/environ).
func TestMCPServerEnvNeverReachesTheSandboxHelper(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatal("gcc is needed to build the preloaded library (.ci/run installs it)")
	}
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logf := mcpFixture(t, dir)
	src := filepath.Join(dir, "preload.c")
	so := filepath.Join(dir, "preload.so")
	if err := os.WriteFile(src, []byte(`#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
	const char *p = getenv("SESSIOND_ATTACK_MARK");
	if (!p) return;
	int fd = open(p, O_CREAT|O_WRONLY|O_APPEND, 0600);
	if (fd >= 0) { write(fd, "escaped\n", 8); close(fd); }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v: %s", err, out)
	}
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: off}\n"), Home: filepath.Join(dir, "home")})
	mark := filepath.Join(d.Home, "escaped")
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{"cwd": dir, "mcp_servers": []any{map[string]any{
		"name": "cl", "command": bin, "args": []string{"-log", logf},
		"env": map[string]string{"LD_PRELOAD": so, "SESSIOND_ATTACK_MARK": mark}}}})
	resume(t, c, s.SessionID)
	m.On("environ", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__cl__readfile", jsonArgs(map[string]string{"path": "/proc/self/environ"}))}}, fixtures.Reply{Text: "x"})
	r := submit(t, c, s.SessionID, "environ", "environ")
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("outcome %s", out)
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("a session-given server's LD_PRELOAD ran code outside the sandbox: %s written in the daemon's home (%q)", mark, b)
	}
	if got := lastResult(m, "environ"); len(got) != 1 || !strings.Contains(got[0], "SESSIOND_ATTACK_MARK="+mark) {
		t.Fatalf("the server did not get its own env: %v", got)
	}
}

// A session-given server is whatever its client named: "always" for its
// tool would approve, in every later session, any program another client
// gives the same name. Its card offers once, session and deny; an
// "always" answer counts as once; the "always" allowlist never covers it.
func TestMCPSessionServerIsNeverAlwaysApproved(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	dir := t.TempDir()
	bin, logA := mcpFixture(t, dir)
	logB := filepath.Join(dir, "other.jsonl")
	m.On("image here", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__cl__image", `{}`)}}, fixtures.Reply{Text: "x"})
	m.On("image elsewhere", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{tc("mcp__cl__image", `{}`)}}, fixtures.Reply{Text: "x"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual}\n")})
	c := d.Dial(t)
	server := func(logf string) []any {
		return []any{map[string]any{"name": "cl", "command": bin, "args": []string{"-log", logf}}}
	}
	s := createSession(t, c, map[string]any{"cwd": dir, "mcp_servers": server(logA)})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "i1", "image here")
	p := waitPrompt(t, c, r.AdmissionID, "approval")
	if pl := promptPayload(t, c, p); strings.Contains(fmt.Sprint(pl["choices"]), "always") {
		t.Errorf("a session-given server's card offers always: %v", pl["choices"])
	}
	if _, err := answerApproval(t, c, s.SessionID, p, "always"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	// Another client's server of the same name, another program.
	s2 := createSession(t, c, map[string]any{"cwd": dir, "mcp_servers": server(logB)})
	resume(t, c, s2.SessionID)
	r = submit(t, c, s2.SessionID, "i2", "image elsewhere")
	p = waitPrompt(t, c, r.AdmissionID, "approval")
	if _, err := answerApproval(t, c, s2.SessionID, p, "deny"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	if n := mcpCount(t, logB, "call", "image"); n != 0 {
		t.Fatalf("another session's server %q ran %d call(s) on the first one's always", "cl", n)
	}
}
