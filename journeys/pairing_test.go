package journeys

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// Journeys of issue 18: paired clients, attribution, scopes, revocation.

type sender struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	Client  string `json:"client"`
	Version string `json:"version"`
}

type pairedReceipt struct {
	receipt
	Sender     *sender `json:"sender"`
	ResolvedBy *sender `json:"resolved_by"`
}

type pairResult struct {
	ClientID string `json:"client_id"`
	Token    string `json:"token"`
	Label    string `json:"label"`
}

func pairURL(d *fixtures.Daemon) string { return strings.TrimSuffix(d.Desc.URL, "/rpc") + "/pair" }

// dialPair opens GET /pair without any token.
func dialPair(t *testing.T, d *fixtures.Daemon) *fixtures.Client {
	t.Helper()
	return fixtures.DialWith(t, pairURL(d), &websocket.DialOptions{Subprotocols: []string{fixtures.Subprotocol}})
}

// pairWith redeems code on /pair as the program name/version.
func pairWith(t *testing.T, d *fixtures.Daemon, code, label, name string) (pairResult, error) {
	t.Helper()
	c := dialPair(t, d)
	defer c.Close()
	if err := c.Call(ctxT(t), "initialize", map[string]any{"client": map[string]string{"name": name, "version": "2.1"}}, nil); err != nil {
		t.Fatalf("initialize on /pair: %v", err)
	}
	var r pairResult
	params := map[string]any{"code": code}
	if label != "" {
		params["label"] = label
	}
	err := c.Call(ctxT(t), "auth.pair", params, &r)
	return r, err
}

// dialAs connects to /rpc with a paired token and initializes as name/2.1.
func dialAs(t *testing.T, d *fixtures.Daemon, token, name string) *fixtures.Client {
	t.Helper()
	c := fixtures.Dial(t, d.Desc.URL, token)
	if err := c.Call(ctxT(t), "initialize", map[string]any{"client": map[string]string{"name": name, "version": "2.1"}}, nil); err != nil {
		t.Fatalf("initialize as %s: %v", name, err)
	}
	return c
}

func submitAs(t *testing.T, c *fixtures.Client, sessionID, inputID, text string) pairedReceipt {
	t.Helper()
	var r pairedReceipt
	if err := c.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": sessionID, "input_id": inputID, "text": text}, &r); err != nil {
		t.Fatalf("prompt.submit %q: %v", text, err)
	}
	return r
}

func wantSender(t *testing.T, what string, got *sender, id, label, client string) {
	t.Helper()
	if got == nil || got.ID != id || got.Label != label || got.Client != client {
		t.Fatalf("%s: sender = %+v, want id %s label %q client %q", what, got, id, label, client)
	}
}

// wantRefused asserts a -32000 refusal with reason.
func wantRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	re, ok := err.(*fixtures.RPCError)
	if !ok || re.Code != -32000 || re.Reason() != reason {
		t.Fatalf("%s: err = %v, want -32000/%s", what, err, reason)
	}
}

// TestPairingAttributesInputsThroughACrash: two paired clients submit to
// one session, the daemon dies (SIGKILL) with one input started and one
// queued; after the restart every receipt, admission.updated event,
// pending entry and transcript message names its sender, the operator's
// resolve is attributed, and no token or code is stored in clear.
func TestPairingAttributesInputsThroughACrash(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	hold := fixtures.NewGate()
	const phoneText, laptopText = "phone: summarise the repo", "laptop: then list the tests"
	m.On(phoneText, fixtures.Reply{Text: "never delivered", Gate: hold})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	owner := dialAs(t, d, d.Desc.Token, "owner-cli")
	s := createSession(t, owner, map[string]any{}).SessionID

	// Code one from the CLI (alone on stdout), code two over the protocol.
	r := ctl(t, d.Home, "", "pair", "--label", "phone")
	ctlWant(t, r, 0)
	code1 := strings.TrimSpace(r.stdout)
	if code1 == "" || strings.ContainsAny(code1, " \n") {
		t.Fatalf("sessionctl pair printed %q, want the code alone", r.stdout)
	}
	var code2 struct {
		Code string `json:"code"`
	}
	if err := owner.Call(ctxT(t), "auth.pairing_code", map[string]any{"label": "laptop"}, &code2); err != nil {
		t.Fatal(err)
	}
	phoneID, err := pairWith(t, d, code1, "", "phone-app")
	if err != nil || phoneID.Label != "phone" || !strings.HasPrefix(phoneID.ClientID, "cli_") || phoneID.Token == "" {
		t.Fatalf("pair phone = %+v, %v", phoneID, err)
	}
	laptopID, err := pairWith(t, d, code2.Code, "", "ide-plugin")
	if err != nil || laptopID.Label != "laptop" {
		t.Fatalf("pair laptop = %+v, %v", laptopID, err)
	}
	// A used code is refused.
	if _, err := pairWith(t, d, code1, "", "thief"); fixtures.ErrorReason(err) != "forbidden" {
		t.Fatalf("a used code: err = %v, want forbidden", err)
	}

	phone := dialAs(t, d, phoneID.Token, "phone-app")
	laptop := dialAs(t, d, laptopID.Token, "ide-plugin")
	resumeAs(t, owner, s)
	r1 := submitAs(t, phone, s, "p-1", phoneText)
	wantSender(t, "phone's receipt", r1.Sender, phoneID.ClientID, "phone", "phone-app")
	if r1.Sender.Version != "2.1" {
		t.Fatalf("phone's receipt sender version %q, want 2.1", r1.Sender.Version)
	}
	owner.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "turn.started" && e.AdmissionID == r1.AdmissionID })
	r2 := submitAs(t, laptop, s, "l-1", laptopText)
	wantSender(t, "laptop's receipt", r2.Sender, laptopID.ClientID, "laptop", "ide-plugin")
	if r2.Status != "queued" {
		t.Fatalf("laptop's input %+v, want queued", r2)
	}
	// A duplicate keeps the first sender, even from another client.
	dup := submitAs(t, owner, s, "l-1", laptopText)
	wantSender(t, "duplicate receipt", dup.Sender, laptopID.ClientID, "laptop", "ide-plugin")

	d.SIGKILL(t)
	d.Restart(t)
	owner = dialAs(t, d, d.Desc.Token, "owner-cli")
	var snap struct {
		Pending  []pairedReceipt `json:"pending"`
		Messages []struct {
			Role        string  `json:"role"`
			AdmissionID string  `json:"admission_id"`
			Sender      *sender `json:"sender"`
		} `json:"messages"`
	}
	if err := owner.Call(ctxT(t), "session.resume", map[string]any{"session_id": s}, &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 2 || snap.Pending[0].Status != "unknown" || snap.Pending[1].Status != "queued" {
		t.Fatalf("pending after restart = %+v, want unknown then queued", snap.Pending)
	}
	wantSender(t, "pending unknown", snap.Pending[0].Sender, phoneID.ClientID, "phone", "phone-app")
	wantSender(t, "pending queued", snap.Pending[1].Sender, laptopID.ClientID, "laptop", "ide-plugin")
	// The CLI shows who sent what.
	ctlWant(t, ctl(t, d.Home, "", "pending", s), 0, "phone ("+phoneID.ClientID+") via phone-app/2.1", "laptop ("+laptopID.ClientID+") via ide-plugin/2.1")

	// The operator resolves the phone's lost turn: attributed to the owner.
	var res pairedReceipt
	if err := owner.Call(ctxT(t), "prompt.resolve_unknown", map[string]any{"session_id": s, "admission_id": r1.AdmissionID,
		"execution_generation": *snap.Pending[0].ExecutionGeneration}, &res); err != nil {
		t.Fatal(err)
	}
	wantSender(t, "resolve receipt resolved_by", res.ResolvedBy, "owner", "", "owner-cli")
	wantSender(t, "resolve receipt sender", res.Sender, phoneID.ClientID, "phone", "phone-app")
	rows := waitAllTerminal(t, db, s)
	if len(rows) != 2 || rows[1].Outcome.String != "completed" {
		t.Fatalf("rows = %+v", rows)
	}

	// Every admission.updated event in the store names the right sender.
	senders := map[string]string{r1.AdmissionID: phoneID.ClientID, r2.AdmissionID: laptopID.ClientID}
	n := 0
	for _, e := range storedEventsAfter(t, db, s, 0) {
		if e.Type != "admission.updated" {
			continue
		}
		var p pairedReceipt
		if err := json.Unmarshal([]byte(e.Payload), &p); err != nil {
			t.Fatal(err)
		}
		if p.Sender == nil || p.Sender.ID != senders[e.AdmissionID.String] {
			t.Fatalf("event %s names sender %+v, want %s", e, p.Sender, senders[e.AdmissionID.String])
		}
		if p.Status == "terminal" && e.AdmissionID.String == r1.AdmissionID && (p.ResolvedBy == nil || p.ResolvedBy.ID != "owner") {
			t.Fatalf("the resolve event %s has resolved_by %+v, want owner", e, p.ResolvedBy)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("only %d admission.updated events", n)
	}
	if err := owner.Call(ctxT(t), "session.resume", map[string]any{"session_id": s}, &snap); err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, msg := range snap.Messages {
		if msg.Role == "user" {
			users++
			if msg.Sender == nil || msg.Sender.ID != senders[msg.AdmissionID] {
				t.Fatalf("user message of %s has sender %+v, want %s", msg.AdmissionID, msg.Sender, senders[msg.AdmissionID])
			}
		}
	}
	if users != 2 {
		t.Fatalf("%d user messages, want 2", users)
	}
	ctlWant(t, ctl(t, d.Home, "", "show", s), 0, "phone › "+phoneText, "laptop › "+laptopText, "sent by laptop ("+laptopID.ClientID+")")

	// Tokens and codes are stored as SHA-256 hashes, never in clear.
	var hashes []string
	if err := db.Select(&hashes, `SELECT token_hash FROM clients ORDER BY created_at`); err != nil {
		t.Fatal(err)
	}
	want := []string{sha(phoneID.Token), sha(laptopID.Token)}
	if len(hashes) != 2 || !(hashes[0] == want[0] && hashes[1] == want[1] || hashes[0] == want[1] && hashes[1] == want[0]) {
		t.Fatalf("token hashes = %v, want sha256 of the two tokens", hashes)
	}
	for _, f := range []string{"state.db", "state.db-wal"} {
		b, err := os.ReadFile(filepath.Join(d.Home, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, secret := range []string{phoneID.Token, laptopID.Token, code1, code2.Code, strings.ReplaceAll(code1, "-", "")} {
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("%s holds a secret in clear (%.8s…)", f, secret)
			}
		}
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func resumeAs(t *testing.T, c *fixtures.Client, sessionID string) {
	t.Helper()
	if err := c.Call(ctxT(t), "session.resume", map[string]any{"session_id": sessionID}, nil); err != nil {
		t.Fatalf("session.resume %s: %v", sessionID, err)
	}
}

// TestPairingScopesRevocationAndCodes: /pair accepts only its two
// methods; an expired code is refused; a read-only client resumes but may
// not submit; a session-scoped client sees only its session; paired
// clients cannot call owner-only methods; an answer is attributed; a
// revoked client is cut off at once (1008) and refused after (401).
func TestPairingScopesRevocationAndCodes(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	const askText = "tablet: clean the scratch dir"
	m.On(askText,
		fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{ID: "call_tablet_rm", Name: "terminal", Arguments: jsonArgs(map[string]string{"command": "rm -rf ./scratch"})}}},
		fixtures.Reply{Text: "left it alone"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 600}")})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	owner := dialAs(t, d, d.Desc.Token, "owner-cli")
	s := createSession(t, owner, map[string]any{}).SessionID
	other := createSession(t, owner, map[string]any{}).SessionID

	// /rpc still refuses an upgrade without a token; /pair needs none but
	// keeps the Origin check.
	if _, resp, err := fixtures.DialRaw(ctxT(t), d.Desc.URL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/rpc without a token: %v %v, want 401", err, resp)
	}
	if _, resp, err := fixtures.DialRaw(ctxT(t), pairURL(d), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/pair with a foreign Origin: %v %v, want 403", err, resp)
	}
	pc := dialPair(t, d)
	for _, method := range []string{"session.list", "prompt.submit", "auth.pairing_code", "clients.list"} {
		err := pc.Call(ctxT(t), method, map[string]any{"session_id": s, "input_id": "x", "text": "x"}, nil)
		wantRefused(t, "/pair "+method, err, "forbidden")
	}
	pc.Close()

	// An expired code is refused.
	r := ctl(t, d.Home, "", "pair", "--ttl", "1s")
	ctlWant(t, r, 0)
	expired := strings.TrimSpace(r.stdout)
	fixtures.Eventually(t, wait, "the code expires", func() bool {
		var at string
		if err := db.Get(&at, `SELECT max(expires_at) FROM pairing_codes`); err != nil {
			return false
		}
		exp, err := time.Parse(time.RFC3339, at)
		return err == nil && time.Now().After(exp.Add(10*time.Millisecond))
	})
	_, err := pairWith(t, d, expired, "", "late")
	wantRefused(t, "an expired code", err, "forbidden")
	ctlWant(t, ctl(t, d.Home, "", "pair", "--ttl", "0s"), 2, "--ttl")

	// Read-only: resume works, every change is forbidden.
	r = ctl(t, d.Home, "", "pair", "--label", "viewer", "--read-only")
	ctlWant(t, r, 0)
	viewerID, err := pairWith(t, d, strings.TrimSpace(r.stdout), "", "viewer-app")
	if err != nil {
		t.Fatal(err)
	}
	viewer := dialAs(t, d, viewerID.Token, "viewer-app")
	resumeAs(t, viewer, s)
	err = viewer.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": s, "input_id": "v-1", "text": "hi"}, nil)
	wantRefused(t, "read-only submit", err, "forbidden")
	for _, call := range []struct {
		method string
		params map[string]any
	}{
		{"prompt.cancel", map[string]any{"session_id": s, "admission_id": "adm_x"}},
		{"session.interrupt", map[string]any{"session_id": s}},
		{"prompt.resolve_unknown", map[string]any{"session_id": s, "admission_id": "adm_x", "execution_generation": 1}},
		{"approval.respond", map[string]any{"session_id": s, "prompt_id": "p", "execution_generation": 1, "choice": "once"}},
		{"session.update", map[string]any{"session_id": s, "title": "x"}},
		{"session.delete", map[string]any{"session_id": s}},
		{"session.create", map[string]any{"cwd": t.TempDir()}},
		{"clients.list", map[string]any{}},
		{"prompt.update", map[string]any{"session_id": s, "admission_id": "adm_x", "text": "x"}},
		{"prompt.move", map[string]any{"session_id": s, "admission_id": "adm_x"}},
		{"session.fork", map[string]any{"session_id": s}},
	} {
		wantRefused(t, "read-only "+call.method, viewer.Call(ctxT(t), call.method, call.params, nil), "forbidden")
	}

	// Session scope: other sessions are not_found, no creation, list shows one.
	r = ctl(t, d.Home, "", "pair", "--label", "scoped", "--session", s)
	ctlWant(t, r, 0)
	scopedID, err := pairWith(t, d, strings.TrimSpace(r.stdout), "tablet", "tablet-app")
	if err != nil || scopedID.Label != "tablet" {
		t.Fatalf("pair scoped = %+v, %v (the client's label wins)", scopedID, err)
	}
	scoped := dialAs(t, d, scopedID.Token, "tablet-app")
	wantRefused(t, "scoped resume of another session", scoped.Call(ctxT(t), "session.resume", map[string]any{"session_id": other}, nil), "not_found")
	wantRefused(t, "scoped submit to another session", scoped.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": other, "input_id": "t-0", "text": "x"}, nil), "not_found")
	wantRefused(t, "scoped create", scoped.Call(ctxT(t), "session.create", map[string]any{"cwd": t.TempDir()}, nil), "forbidden")
	// Input delivery (issue 25): another session's queue is out of reach,
	// and a fork, even of its own session, creates a session beyond it.
	wantRefused(t, "scoped update in another session", scoped.Call(ctxT(t), "prompt.update",
		map[string]any{"session_id": other, "admission_id": "adm_x", "text": "x"}, nil), "not_found")
	wantRefused(t, "scoped move in another session", scoped.Call(ctxT(t), "prompt.move",
		map[string]any{"session_id": other, "admission_id": "adm_x"}, nil), "not_found")
	wantRefused(t, "scoped fork of another session", scoped.Call(ctxT(t), "session.fork", map[string]any{"session_id": other}, nil), "not_found")
	wantRefused(t, "scoped fork of its session", scoped.Call(ctxT(t), "session.fork", map[string]any{"session_id": s}, nil), "forbidden")
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
		} `json:"sessions"`
	}
	if err := scoped.Call(ctxT(t), "session.list", map[string]any{}, &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionID != s {
		t.Fatalf("scoped session.list = %+v, %v; want only %s", list, err, s)
	}
	// Its input is attributed, and so is its answer to the approval.
	resumeAs(t, scoped, s)
	rc := submitAs(t, scoped, s, "t-1", askText)
	wantSender(t, "scoped receipt", rc.Sender, scopedID.ClientID, "tablet", "tablet-app")
	ap := waitPrompt(t, scoped, rc.AdmissionID, "approval")
	if res, err := answerApproval(t, scoped, s, ap, "deny"); err != nil || res.Status != "resolved" {
		t.Fatalf("the tablet's deny: %+v, %v", res, err)
	}
	closed := scoped.WaitEvent(t, wait, func(e fixtures.Event) bool { return e.Type == "prompt.closed" && e.AdmissionID == rc.AdmissionID })
	var cp struct {
		AnsweredBy map[string]string `json:"answered_by"`
	}
	json.Unmarshal(closed.Payload, &cp)
	if by := cp.AnsweredBy; by["id"] != scopedID.ClientID || by["label"] != "tablet" || by["client"] != "tablet-app/2.1" {
		t.Fatalf("prompt.closed answered_by = %v, want the tablet", by)
	}
	waitAllTerminal(t, db, s)

	// The owner's token keeps working, and clients ls lists all three.
	ctlWant(t, ctl(t, d.Home, "", "clients"), 0, viewerID.ClientID, scopedID.ClientID, "session "+s, "read-only")

	// Revocation: the open connection is closed at once with 1008, the
	// token is refused with 401 after.
	resumeAs(t, scoped, s)
	ctlWant(t, ctl(t, d.Home, "", "clients", "rm", scopedID.ClientID), 0, "revoked "+scopedID.ClientID, "1 connection(s) closed")
	if code := scoped.WaitClosed(t, wait); code != websocket.StatusPolicyViolation {
		t.Fatalf("the revoked client's connection closed with %d, want 1008", code)
	}
	_, resp, err := fixtures.DialRaw(ctxT(t), d.Desc.URL, &websocket.DialOptions{HTTPHeader: fixtures.BearerHeader(scopedID.Token), Subprotocols: []string{fixtures.Subprotocol}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a revoked token: %v %v, want 401", err, resp)
	}
	var lastUsed *string
	if err := db.Get(&lastUsed, `SELECT last_used_at FROM clients WHERE client_id = ?`, viewerID.ClientID); err != nil || lastUsed == nil {
		t.Fatalf("the viewer's last_used_at = %v, %v; want set by its upgrade", lastUsed, err)
	}
	var revokedAt *string
	if err := db.Get(&revokedAt, `SELECT revoked_at FROM clients WHERE client_id = ?`, scopedID.ClientID); err != nil || revokedAt == nil {
		t.Fatalf("revoked_at = %v, %v", revokedAt, err)
	}
	// The viewer is untouched, the owner still works, and an unknown id is not_found.
	resumeAs(t, viewer, s)
	wantRefused(t, "revoke unknown", owner.Call(ctxT(t), "clients.revoke", map[string]any{"client_id": "cli_nope"}, nil), "not_found")
}

// TestPairingRateLimitsWrongCodes: a peer that sends too many wrong codes
// is refused (overloaded) even with a right one, for a while.
func TestPairingRateLimitsWrongCodes(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	r := ctl(t, d.Home, "", "pair")
	ctlWant(t, r, 0)
	good := strings.TrimSpace(r.stdout)
	for i := range 5 {
		_, err := pairWith(t, d, "AAAAA-AAAA"+string(rune('A'+i)), "", "guesser")
		wantRefused(t, "a wrong code", err, "forbidden")
	}
	_, err := pairWith(t, d, good, "", "guesser")
	wantRefused(t, "the right code after five wrong ones", err, "overloaded")
}
