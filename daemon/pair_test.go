package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/protocol"
)

func TestPairingCodeShape(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c := newCode()
		if len(c) != codeLen+1 || c[5] != '-' {
			t.Fatalf("code %q is not XXXXX-XXXXX", c)
		}
		n := normalizeCode(strings.ToLower(c))
		if len(n) != codeLen {
			t.Fatalf("normalize(%q) = %q", c, n)
		}
		for _, r := range n {
			if !strings.ContainsRune(pairingAlphabet, r) {
				t.Fatalf("code %q has %q outside the alphabet", c, r)
			}
		}
		if seen[n] {
			t.Fatalf("code %q repeated", c)
		}
		seen[n] = true
	}
	if tok := newToken(); !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
		t.Fatalf("token %q: want sdp_ and 43 base64url characters (256 bits)", tok)
	}
	if normalizeCode(" ab cde-FGHJK ") != "ABCDEFGHJK" {
		t.Fatal("normalizeCode must drop spaces and dashes and upper-case")
	}
}

func TestPairLimiterBoundsFailuresPerPeer(t *testing.T) {
	var l pairLimiter
	now := time.Unix(1000, 0)
	for i := range pairFailures {
		if !l.reserve("10.0.0.1", now) {
			t.Fatalf("refused after %d failures, want %d allowed", i, pairFailures)
		}
	}
	if l.reserve("10.0.0.1", now.Add(time.Second)) {
		t.Fatal("allowed after the limit")
	}
	if !l.reserve("10.0.0.2", now) {
		t.Fatal("another peer must not be limited")
	}
	if !l.reserve("10.0.0.1", now.Add(pairWindow)) {
		t.Fatal("still refused after the window")
	}
	// A good code gives its attempt back.
	var g pairLimiter
	for range 3 * pairFailures {
		if !g.reserve("10.0.0.3", now) {
			t.Fatal("attempts that were given back count as failures")
		}
		g.refund("10.0.0.3")
	}
}

func TestPairingCodeRefusesBadParams(t *testing.T) {
	d := startTest(t, "")
	for _, tc := range []struct {
		params any
		reason protocol.Reason
	}{
		{map[string]any{"ttl_seconds": -1}, protocol.ReasonInvalidParams},
		{map[string]any{"ttl_seconds": 86401}, protocol.ReasonInvalidParams},
		{map[string]any{"label": "a\nb"}, protocol.ReasonInvalidParams},
		{map[string]any{"label": strings.Repeat("x", 129)}, protocol.ReasonInvalidParams},
		{map[string]any{"session_id": "ses_nope"}, protocol.ReasonNotFound},
		{map[string]any{"read_only": "yes"}, protocol.ReasonInvalidParams},
	} {
		_, err := call(t, d.pairingCode, tc.params)
		wantWire(t, err, tc.reason)
	}
	_, err := call(t, d.clientsRevoke, map[string]any{"client_id": "cli_nope"})
	wantWire(t, err, protocol.ReasonNotFound)
	_, err = call(t, d.clientsRevoke, map[string]any{})
	wantWire(t, err, protocol.ReasonInvalidParams)
	_, err = call(t, d.pair, map[string]any{})
	wantWire(t, err, protocol.ReasonInvalidParams)
	_, err = call(t, d.pair, map[string]any{"code": "short"})
	wantWire(t, err, protocol.ReasonForbidden)
	res, err := call(t, d.pairingCode, map[string]any{"label": "ok", "ttl_seconds": 60})
	if err != nil || len(res.(protocol.PairingCodeResult).Code) != codeLen+1 {
		t.Fatalf("pairing_code = %v, %v", res, err)
	}
	out, err := call(t, d.pair, map[string]any{"code": strings.ToLower(res.(protocol.PairingCodeResult).Code)})
	if err != nil || out.(protocol.PairResult).Label != "ok" {
		t.Fatalf("auth.pair with a lower-case code = %v, %v", out, err)
	}
}

// TestPairConnectionsAreBounded: tokenless GET /pair connections are at
// most maxPairConns, so they cannot take the slots of real clients; the
// owner still connects while they are all open.
func TestPairConnectionsAreBounded(t *testing.T) {
	d := startTest(t, "")
	ctx := context.Background()
	pairURL := strings.TrimSuffix(d.desc.URL, "/rpc") + "/pair"
	opts := &websocket.DialOptions{Subprotocols: []string{SubprotocolV1}}
	var conns []*websocket.Conn
	for range maxPairConns {
		c, _, err := websocket.Dial(ctx, pairURL, opts)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"client":{"name":"x"}}}`))
		if _, _, err := c.Read(ctx); err != nil { // registered and served
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	extra, _, err := websocket.Dial(ctx, pairURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err = extra.Read(ctx); websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Fatalf("pairing connection %d: %v, want close 1013", maxPairConns+1, err)
	}
	owner, _, err := websocket.Dial(ctx, d.desc.URL, &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + d.token}}, Subprotocols: []string{SubprotocolV1}})
	if err != nil {
		t.Fatalf("the owner while pairing slots are full: %v", err)
	}
	owner.CloseNow()
	conns[0].Close(websocket.StatusNormalClosure, "")
	waitFor(t, func() bool { d.connMu.Lock(); defer d.connMu.Unlock(); return d.pairConns < maxPairConns })
	for _, c := range conns[1:] {
		c.CloseNow()
	}
}
