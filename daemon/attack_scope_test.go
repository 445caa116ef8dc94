package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
)

// Attacks on the paired clients' scopes (attack round 3): a paired client
// holding a read-only, a session-scoped or a session-scoped read-only
// token tries to reach another session's data or to change anything
// beyond its scope. Each test names the attack and its impact; the ones
// marked "(passes)" are attacks that held.

const scopeWait = 30 * time.Second

// pairToken redeems a fresh code of d with the code params and returns
// the paired client's token.
func pairToken(t *testing.T, d *Daemon, code map[string]any) (clientID, token string) {
	t.Helper()
	res, err := call(t, d.pairingCode, code)
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, d.pair, map[string]any{"code": res.(protocol.PairingCodeResult).Code})
	if err != nil {
		t.Fatal(err)
	}
	pr := out.(protocol.PairResult)
	return pr.ClientID, pr.Token
}

func dialPaired(t *testing.T, d *Daemon, code map[string]any) *fixtures.Client {
	t.Helper()
	_, tok := pairToken(t, d, code)
	return fixtures.Dial(t, d.desc.URL, tok)
}

// scopeApprovalDaemon starts a daemon whose model answers "go" and "go
// again" with an `rm -rf` that needs approval.
func scopeApprovalDaemon(t *testing.T) (*Daemon, *fixtures.FakeModel) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"command": "rm -rf ./build-cache"})
	var fm *fixtures.FakeModel
	d := startTestWith(t, "", func(m2 *fixtures.FakeModel) {
		fm = m2
		m2.On("go", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: string(args)}}},
			fixtures.Reply{Text: "done"})
		m2.On("go again", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "terminal", Arguments: string(args)}}},
			fixtures.Reply{Text: "done again"})
	})
	return d, fm
}

// TestAttackScopeSessionClientAlwaysApprovalIsDaemonWide: a session-scoped
// paired client answers an approval of its own session with choice
// "always". The daemon stores the pattern in approval_allowlist, which
// allows it in EVERY session: the next `rm -rf` of another session (one
// the client may not even see) runs without asking its owner. That is a
// daemon-wide write, which docs/protocol.md Part 2 I refuses to a
// session-scoped client (it refuses approvals.revoke of an "always" rule
// for the same reason); the guard only looks at session_id, which names
// the client's own session. Impact: a phone paired to one session
// disables the approval gate of a command class daemon-wide. What should
// hold: the answer is refused (forbidden) or counts as "session" at most;
// no "always" rule is created, and the other session still asks.
func TestAttackScopeSessionClientAlwaysApprovalIsDaemonWide(t *testing.T) {
	d, _ := scopeApprovalDaemon(t)
	ctx := context.Background()
	owner := fixtures.Dial(t, d.desc.URL, d.token)
	var mine, theirs protocol.Snapshot
	for _, s := range []*protocol.Snapshot{&mine, &theirs} {
		if err := owner.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir(), "toolsets": []string{"terminal"}}, s); err != nil {
			t.Fatal(err)
		}
	}
	scoped := dialPaired(t, d, map[string]any{"label": "phone", "session_id": mine.SessionID})
	if err := scoped.Call(ctx, protocol.MethodSessionResume, map[string]any{"session_id": mine.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	submit(t, scoped, mine.SessionID, "in-1", "go")
	opened := scoped.WaitEvent(t, scopeWait, func(ev fixtures.Event) bool { return ev.Type == "prompt.opened" })
	var p struct {
		Prompt protocol.Prompt `json:"prompt"`
	}
	if err := json.Unmarshal(opened.Payload, &p); err != nil {
		t.Fatal(err)
	}
	t.Logf("approval payload: %s", p.Prompt.Payload)
	err := scoped.Call(ctx, protocol.MethodApprovalRespond, map[string]any{"session_id": mine.SessionID, "prompt_id": p.Prompt.PromptID,
		"execution_generation": p.Prompt.ExecutionGeneration, "choice": "always"}, nil)
	t.Logf("session-scoped approval.respond always: %v", err)
	var rules []string
	if err := d.db.Select(ctx, &rules, `SELECT pattern FROM approval_allowlist`); err != nil {
		t.Fatal(err)
	}
	if len(rules) > 0 {
		t.Errorf("a client scoped to session %s created the daemon-wide \"always\" rules %v: every session now runs them unasked", mine.SessionID, rules)
	}
	// The other session's identical command must still ask its owner.
	if err := owner.Call(ctx, protocol.MethodSessionResume, map[string]any{"session_id": theirs.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	submit(t, owner, theirs.SessionID, "in-2", "go again")
	ev := owner.WaitEvent(t, scopeWait, func(ev fixtures.Event) bool {
		return ev.SessionID == theirs.SessionID && (ev.Type == "prompt.opened" || ev.Type == "tool.running" || ev.Type == "tool.completed")
	})
	if ev.Type != "prompt.opened" {
		t.Errorf("the other session's `rm -rf` ran without asking (%s): the scoped client's \"always\" reached it", ev.Type)
	}
}

// TestAttackScopeRevokedClientStaysConnectedToTheOtherDaemon: in a
// cluster, a paired client holds an open connection to daemon B; the
// owner revokes it on daemon A (clients.revoke, sessionctl clients rm).
// Revocation is documented as immediate ("the client's open connections
// are closed with 1008"), but only A's connections are closed: d.revoked
// and the scan of d.conns are per process, and B never learns of it. The
// revoked client keeps reading and writing through B until it
// disconnects on its own. Impact: a stolen phone that the owner revoked
// keeps driving sessions. What should hold: B closes the connection (or
// refuses its calls) shortly after the revocation commits.
func TestAttackScopeRevokedClientStaysConnectedToTheOtherDaemon(t *testing.T) {
	st := sharedStore{path: t.TempDir() + "/state.db"}
	m := fixtures.NewFakeModel(t)
	a := startClusterDaemon(t, st, m, "")
	b := startClusterDaemon(t, st, m, "")
	ctx := context.Background()
	id, tok := pairToken(t, a, map[string]any{"label": "stolen phone"})
	onB := fixtures.Dial(t, b.desc.URL, tok)
	if err := onB.Call(ctx, protocol.MethodSessionList, nil, nil); err != nil {
		t.Fatal(err)
	}
	var rr protocol.RevokeResult
	if err := fixtures.Dial(t, a.desc.URL, a.token).Call(ctx, protocol.MethodClientsRevoke, map[string]any{"client_id": id}, &rr); err != nil {
		t.Fatal(err)
	}
	// A new upgrade is refused on B (the store says revoked)...
	if c, _, err := fixtures.DialRaw(ctx, b.desc.URL, &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + tok}},
		Subprotocols: []string{SubprotocolV1}}); err == nil {
		c.CloseNow()
		t.Fatal("a revoked token was accepted by B")
	}
	// ...but the open connection must end too.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var snap protocol.Snapshot
		err := onB.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir()}, &snap)
		if err != nil {
			return // closed or refused: the revocation reached B
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("10s after clients.revoke on A, client %s revoked still creates sessions through its open connection to B", id)
}

// TestAttackScopePairRateLimitRacesConcurrentGuesses: the limit "at most 5
// wrong codes per peer a minute" is checked (allow) before the code's
// transaction and counted (fail) after it, so requests pipelined on one
// GET /pair connection (up to limits.max_in_flight run at once, 8 such
// connections) all pass the check before the first failure is counted.
// Impact: the guessing bound is about max_in_flight×8 codes per minute,
// not 5 (still far from 2^50, but the documented bound does not hold).
// What should hold: of 40 concurrent wrong guesses from one peer, at most
// 5 are tried (forbidden); the rest are overloaded.
func TestAttackScopePairRateLimitRacesConcurrentGuesses(t *testing.T) {
	d := startTest(t, "")
	pairURL := strings.TrimSuffix(d.desc.URL, "/rpc") + "/pair"
	c := fixtures.DialWith(t, pairURL, &websocket.DialOptions{Subprotocols: []string{SubprotocolV1}})
	ctx := context.Background()
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = c.Call(ctx, protocol.MethodPair, map[string]any{"code": fmt.Sprintf("ABCDE-%05d", 20000+i)[:11]}, nil)
		})
	}
	wg.Wait()
	tried := 0
	for _, err := range errs {
		switch fixtures.ErrorReason(err) {
		case string(protocol.ReasonForbidden):
			tried++
		case string(protocol.ReasonOverloaded):
		default:
			t.Fatalf("auth.pair: %v", err)
		}
	}
	if tried > pairFailures {
		t.Errorf("%d of %d concurrent wrong codes from one peer were tried; the limit is %d a minute", tried, n, pairFailures)
	}
}

// TestAttackScopeDaemonInfoCountsOtherSessions: to a session-scoped
// client every other session is "not_found (as if it did not exist)" and
// session.list shows its session only, but daemon.info (a daemon-wide
// read the guard lets through) reports the daemon-wide counts: sessions,
// running_turns, held_sessions, open_prompts, and the home and database
// paths. Impact: the scoped client learns how many other sessions exist
// and when they run or wait for approval (activity of other users), and
// the owner's file layout. What should hold: the counts a session-scoped
// client sees cover its session only.
func TestAttackScopeDaemonInfoCountsOtherSessions(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	mustSession(t, d)
	mustSession(t, d)
	scoped := dialPaired(t, d, map[string]any{"label": "s", "session_id": sid, "read_only": true})
	var info protocol.DaemonInfo
	if err := scoped.Call(context.Background(), protocol.MethodDaemonInfo, nil, &info); err != nil {
		t.Fatal(err)
	}
	if info.Sessions != 1 {
		t.Errorf("daemon.info to a client scoped to one session: sessions = %d (the other sessions exist for it after all)", info.Sessions)
	}
}

// TestAttackScopeHeldParamTricks (passes): a session-scoped (write) client
// tries to name another session past the guard: duplicate session_id
// members (the guard and the handler both take the last), case variants
// and a Unicode fold (ſ, U+017F) of the member name (the handler refuses
// case variants), null and absent session_id for methods that require
// it, a very long id, and ids of another session's admission and prompt
// under its own session_id. Nothing of the other session changes.
func TestAttackScopeHeldParamTricks(t *testing.T) {
	d, _ := scopeApprovalDaemon(t)
	ctx := context.Background()
	owner := fixtures.Dial(t, d.desc.URL, d.token)
	var mine, theirs protocol.Snapshot
	for _, s := range []*protocol.Snapshot{&mine, &theirs} {
		if err := owner.Call(ctx, protocol.MethodSessionCreate, map[string]any{"cwd": t.TempDir(), "toolsets": []string{"terminal"}, "title": "orig"}, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := owner.Call(ctx, protocol.MethodSessionResume, map[string]any{"session_id": theirs.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	// Their turn waits on an approval, their second input is queued.
	submit(t, owner, theirs.SessionID, "t-1", "go")
	opened := owner.WaitEvent(t, scopeWait, func(ev fixtures.Event) bool { return ev.Type == "prompt.opened" })
	var p struct {
		Prompt protocol.Prompt `json:"prompt"`
	}
	if err := json.Unmarshal(opened.Payload, &p); err != nil {
		t.Fatal(err)
	}
	queued := submit(t, owner, theirs.SessionID, "t-2", "later")
	scoped := dialPaired(t, d, map[string]any{"label": "s", "session_id": mine.SessionID})
	if err := scoped.Call(ctx, protocol.MethodSessionResume, map[string]any{"session_id": mine.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	before := storeStateNoClients(t, d, theirs.SessionID)
	m, th := mine.SessionID, theirs.SessionID
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		method string
		params any
	}{
		{"session.update", raw(fmt.Sprintf(`{"session_id":%q,"session_id":%q,"title":"stolen"}`, m, th))},
		{"session.update", raw(fmt.Sprintf(`{"session_id":%q,"SESSION_ID":%q,"title":"stolen"}`, m, th))},
		{"session.update", raw(fmt.Sprintf(`{"session_id":%q,"ſession_id":%q,"title":"stolen"}`, m, th))},
		{"session.update", raw(fmt.Sprintf(`{"session_id":%q,"session_\u0069d":%q,"title":"stolen"}`, m, th))},
		{"session.update", raw(`{"session_id":null,"title":"stolen"}`)},
		{"session.update", raw(`{"title":"stolen"}`)},
		{"session.update", map[string]any{"session_id": th + strings.Repeat("x", 1<<16), "title": "stolen"}},
		{"session.delete", raw(fmt.Sprintf(`{"session_id":%q,"session_id":%q}`, m, th))},
		{"prompt.cancel", map[string]any{"session_id": m, "admission_id": queued.AdmissionID}},
		{"approval.respond", map[string]any{"session_id": m, "prompt_id": p.Prompt.PromptID, "execution_generation": p.Prompt.ExecutionGeneration, "choice": "always"}},
		{"session.interrupt", raw(fmt.Sprintf(`{"session_id":%q,"Session_id":%q}`, m, th))},
		{"approvals.revoke", raw(`{"pattern":"rm-recursive","session_id":null}`)},
		{"session.resume", raw(fmt.Sprintf(`{"session_id":%q,"session_id":%q,"after_seq":0}`, m, th))},
		{"session.messages", raw(fmt.Sprintf(`{"session_id":%q,"session_id":%q}`, m, th))},
		{"approvals.list", raw(fmt.Sprintf(`{"session_id":%q,"session_id":%q}`, m, th))},
	} {
		res, rerr, err := scoped.CallRaw(ctx, tc.method, tc.params)
		if err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		if msg := fmt.Sprint(rerr); len(msg) < 300 {
			t.Logf("%s: %s", tc.method, msg)
		}
		if rerr == nil && strings.Contains(string(res), th) {
			t.Errorf("%s %v: answered with the other session: %s", tc.method, tc.params, res)
		}
	}
	// The answer to their approval never came from the scoped client.
	time.Sleep(200 * time.Millisecond)
	if after := storeStateNoClients(t, d, theirs.SessionID); after != before {
		t.Errorf("the other session changed:\nbefore %s\nafter  %s", before, after)
	}
	// Their session moves on (the owner denies, the turn ends) while the
	// scoped client is subscribed to its own: none of it reaches it.
	if err := owner.Call(ctx, protocol.MethodApprovalRespond, map[string]any{"session_id": th, "prompt_id": p.Prompt.PromptID,
		"execution_generation": p.Prompt.ExecutionGeneration, "choice": "deny"}, nil); err != nil {
		t.Fatal(err)
	}
	owner.WaitEvent(t, scopeWait, func(ev fixtures.Event) bool { return ev.SessionID == th && ev.Type == "prompt.closed" })
	if err := scoped.Call(ctx, protocol.MethodSessionList, nil, nil); err != nil { // a round trip after the events
		t.Fatal(err)
	}
	for _, ev := range scoped.Events() {
		if ev.SessionID != mine.SessionID {
			t.Errorf("the scoped client received an event of session %s: %s", ev.SessionID, ev.Type)
		}
	}
}

// storeStateNoClients is the rows of session sid that a paired client
// could change: the session, its admissions, prompts and events, and the
// allowlists.
func storeStateNoClients(t *testing.T, d *Daemon, sid string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT title FROM sessions WHERE session_id = ?`,
		`SELECT admission_id || status FROM session_admissions WHERE target_session_id = ? ORDER BY 1`,
		`SELECT prompt_id || status FROM prompts WHERE session_id = ? ORDER BY 1`,
		`SELECT count(*) FROM events WHERE session_id = ?`,
	} {
		var rows []string
		if err := d.db.Select(context.Background(), &rows, q, sid); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v;", rows)
	}
	var rules []string
	d.db.Select(context.Background(), &rules, `SELECT pattern FROM approval_allowlist`)
	fmt.Fprintf(&b, "always %v", rules)
	return b.String()
}

// TestAttackScopeHeldNotificationsAndPairEndpoint (passes): a read-only
// paired client sends write methods as notifications (no id: no answer,
// so a refusal would go unseen), a batch, and the owner methods; GET
// /pair is asked for every other method; a used code is redeemed again.
// Nothing changes and the /pair connection gets nothing but forbidden.
func TestAttackScopeHeldNotificationsAndPairEndpoint(t *testing.T) {
	d := startTest(t, "")
	sid := mustSession(t, d)
	ctx := context.Background()
	ro := dialPaired(t, d, map[string]any{"label": "ro", "read_only": true})
	before := storeState(t, d)
	for _, f := range []string{
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"session.update","params":{"session_id":%q,"title":"x"}}`, sid),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"session.delete","params":{"session_id":%q}}`, sid),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"prompt.submit","params":{"session_id":%q,"input_id":"n1","text":"x"}}`, sid),
		`{"jsonrpc":"2.0","method":"auth.pairing_code","params":{"label":"mine"}}`,
		fmt.Sprintf(`[{"jsonrpc":"2.0","id":9,"method":"session.delete","params":{"session_id":%q}}]`, sid),
	} {
		if err := ro.SendText(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := ro.Call(ctx, protocol.MethodSessionList, nil, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if after := storeState(t, d); after != before {
		t.Errorf("a read-only client's notifications changed the store")
	}
	for _, m := range []string{protocol.MethodClientsList, protocol.MethodPairingCode, protocol.MethodClientsRevoke} {
		if err := ro.Call(ctx, m, map[string]any{"client_id": "x"}, nil); fixtures.ErrorReason(err) != string(protocol.ReasonForbidden) {
			t.Errorf("read-only %s: %v", m, err)
		}
	}
	pairURL := strings.TrimSuffix(d.desc.URL, "/rpc") + "/pair"
	pc := fixtures.DialWith(t, pairURL, &websocket.DialOptions{Subprotocols: []string{SubprotocolV1}})
	for _, spec := range protocol.Methods {
		if spec.Name == protocol.MethodInitialize || spec.Name == protocol.MethodPair {
			continue
		}
		if err := pc.Call(ctx, spec.Name, map[string]any{"session_id": sid}, nil); fixtures.ErrorReason(err) != string(protocol.ReasonForbidden) {
			t.Errorf("/pair answered %s: %v", spec.Name, err)
		}
	}
	res, err := call(t, d.pairingCode, map[string]any{"label": "once"})
	if err != nil {
		t.Fatal(err)
	}
	code := res.(protocol.PairingCodeResult).Code
	if err := pc.Call(ctx, protocol.MethodPair, map[string]any{"code": code}, nil); err != nil {
		t.Fatal(err)
	}
	if err := pc.Call(ctx, protocol.MethodPair, map[string]any{"code": strings.ToLower(strings.ReplaceAll(code, "-", " "))}, nil); fixtures.ErrorReason(err) != string(protocol.ReasonForbidden) {
		t.Errorf("a used code redeemed again: %v", err)
	}
}

// TestAttackScopeHeldRevocationSameDaemon (passes): a revoked client's
// open connection on the daemon that revoked it is closed at once, and
// its calls in flight after that fail.
func TestAttackScopeHeldRevocationSameDaemon(t *testing.T) {
	d := startTest(t, "")
	id, tok := pairToken(t, d, map[string]any{"label": "x"})
	c := fixtures.Dial(t, d.desc.URL, tok)
	if err := c.Call(context.Background(), protocol.MethodSessionList, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, d.clientsRevoke, map[string]any{"client_id": id}); err != nil {
		t.Fatal(err)
	}
	if st := c.WaitClosed(t, 5*time.Second); st != websocket.StatusPolicyViolation {
		t.Fatalf("revoked connection closed with %d, want 1008", st)
	}
}

// TestAttackScopePairedLabelPosesAsTheOwner: auth.pair lets the client
// that redeems a code choose its own label, replacing the one the owner
// gave the code, with no check but length and control characters. A
// client pairs as "you": sessionctl show/attach prefix its inputs with
// "you › ", exactly as the owner's own (cmd/sessionctl userPrefix), and
// clients.list shows "you" instead of the owner's "colleague". Impact:
// a paired client's inputs (an `rm -rf` it asked for) read as the
// owner's in the transcript; attribution, issue 18's point, is spoofed.
// What should hold: the reserved names of the owner ("you", "owner") are
// refused as labels, or the owner's label is kept.
func TestAttackScopePairedLabelPosesAsTheOwner(t *testing.T) {
	d := startTest(t, "")
	for _, label := range []string{"you", "owner", "You"} {
		res, err := call(t, d.pairingCode, map[string]any{"label": "colleague"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := call(t, d.pair, map[string]any{"code": res.(protocol.PairingCodeResult).Code, "label": label})
		if err != nil {
			continue // refused: holds
		}
		if got := out.(protocol.PairResult).Label; strings.EqualFold(got, "you") || strings.EqualFold(got, protocol.SenderOwner) {
			t.Errorf("a code the owner labelled \"colleague\" was redeemed with label %q: its inputs show as %q › …", label, got)
		}
	}
}

// TestAttackScopeHeldCodeRedeemedTwiceAtOnce (passes): one code redeemed
// by 10 concurrent auth.pair calls gives one token.
func TestAttackScopeHeldCodeRedeemedTwiceAtOnce(t *testing.T) {
	d := startTest(t, "")
	res, err := call(t, d.pairingCode, map[string]any{"label": "once"})
	if err != nil {
		t.Fatal(err)
	}
	code := res.(protocol.PairingCodeResult).Code
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 10 {
		wg.Go(func() {
			if _, err := call(t, d.pair, map[string]any{"code": code}); err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("one code redeemed %d times", won)
	}
}
