package journeys

// Adversarial regression on the wire: malformed frames, a submit whose
// connection vanishes at once, and upgrades that must be refused.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// TestAttackMalformedFrames: every malformed frame gets the documented
// JSON-RPC error (with error.data.reason) and the connection stays usable.
func TestAttackMalformedFrames(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	sid := s.SessionID

	cases := []struct {
		name, frame string
		codes       []float64 // accepted error codes
		wantID      any       // nil: id null
	}{
		{"invalid-utf8-outside-string", "{\"jsonrpc\":\"2.0\",\"id\":1,\xff\"method\":\"daemon.info\"}", []float64{-32700}, nil},
		{"invalid-utf8-in-method", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.info\xc0\"}", []float64{-32700}, nil},
		// Valid JSON too deep for any decoder: refused, never a crash.
		{"deep-nesting-100k", `{"jsonrpc":"2.0","id":2,"method":"daemon.info","params":{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`, []float64{-32700, -32600, -32602}, nil},
		{"id-object", `{"jsonrpc":"2.0","id":{"a":1},"method":"daemon.info"}`, []float64{-32600}, nil},
		{"id-array", `{"jsonrpc":"2.0","id":[1],"method":"daemon.info"}`, []float64{-32600}, nil},
		{"id-bool", `{"jsonrpc":"2.0","id":true,"method":"daemon.info"}`, []float64{-32600}, nil},
		{"params-string", `{"jsonrpc":"2.0","id":3,"method":"daemon.info","params":"x"}`, []float64{-32602}, float64(3)},
		{"params-number", `{"jsonrpc":"2.0","id":4,"method":"daemon.info","params":5}`, []float64{-32602}, float64(4)},
		{"params-array", `{"jsonrpc":"2.0","id":5,"method":"session.resume","params":["` + sid + `"]}`, []float64{-32602}, float64(5)},
		{"unknown-method", `{"jsonrpc":"2.0","id":6,"method":"rm.rf","params":{}}`, []float64{-32601}, float64(6)},
		{"no-jsonrpc", `{"id":7,"method":"daemon.info"}`, []float64{-32600}, float64(7)},
		{"batch", `[{"jsonrpc":"2.0","id":8,"method":"daemon.info"}]`, []float64{-32600}, nil},
		{"empty-batch", `[]`, []float64{-32600}, nil},
		{"not-json", `hello`, []float64{-32700}, nil},
		{"empty-frame", ``, []float64{-32700}, nil},
		{"scalar", `42`, []float64{-32600}, nil},
		{"method-number", `{"jsonrpc":"2.0","id":9,"method":5}`, []float64{-32600}, float64(9)},
		{"text-number", `{"jsonrpc":"2.0","id":10,"method":"prompt.submit","params":{"session_id":"` + sid + `","input_id":"x","text":5}}`, []float64{-32602}, float64(10)},
		{"input-id-too-long", `{"jsonrpc":"2.0","id":11,"method":"prompt.submit","params":{"session_id":"` + sid + `","input_id":"` + strings.Repeat("a", 129) + `","text":"t"}}`, []float64{-32602}, float64(11)},
		{"input-id-bad-chars", `{"jsonrpc":"2.0","id":12,"method":"prompt.submit","params":{"session_id":"` + sid + `","input_id":"a/b","text":"t"}}`, []float64{-32602}, float64(12)},
		{"after-seq-huge", `{"jsonrpc":"2.0","id":13,"method":"session.resume","params":{"session_id":"` + sid + `","after_seq":1e400}}`, []float64{-32602}, float64(13)},
		{"gen-float", `{"jsonrpc":"2.0","id":14,"method":"session.interrupt","params":{"session_id":"` + sid + `","execution_generation":1.5}}`, []float64{-32602}, float64(14)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := atkRawReply(t, c, tc.frame)
			code, reason := atkErrCode(r)
			ok := false
			for _, want := range tc.codes {
				ok = ok || code == want
			}
			if !ok || reason == "" {
				t.Errorf("reply %.300v: code %v reason %q, want one of %v with a reason", r, code, reason, tc.codes)
			}
			if fmt.Sprint(r["id"]) != fmt.Sprint(tc.wantID) {
				t.Errorf("reply id %v, want %v", r["id"], tc.wantID)
			}
			atkAlive(t, c)
		})
	}

	t.Run("ids-echoed-verbatim", func(t *testing.T) {
		for _, id := range []string{`123456789012345678901234567890`, `1e999`, `-0`, `"` + strings.Repeat("x", 1000) + `"`, `1.5`} {
			if err := c.SendText(ctxT(t), `{"jsonrpc":"2.0","id":`+id+`,"method":"daemon.info"}`); err != nil {
				t.Fatal(err)
			}
			raw, err := c.ReadRawResponse(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(raw, &env); err != nil || env.Result == nil {
				t.Errorf("id %.40s: reply %.300s, want a result", id, raw)
			}
			if string(env.ID) != id {
				t.Errorf("id %.40s echoed as %.40s", id, env.ID)
			}
		}
	})

	// Two different byte strings that a lenient decoder turns into the
	// same U+FFFD text must never be taken for one input: a frame that is
	// not UTF-8 is a parse error, admits nothing and merges with nothing.
	t.Run("invalid-utf8-text-identity", func(t *testing.T) {
		frame := func(id int, input, text string) string {
			return fmt.Sprintf("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"prompt.submit\",\"params\":{\"session_id\":%q,\"input_id\":%q,\"text\":\"%s\"}}", id, sid, input, text)
		}
		for i, text := range []string{"a\xffb", "a\xfeb"} {
			r := atkRawReply(t, c, frame(20+i, "utf8-raw", text))
			if code, reason := atkErrCode(r); code != -32700 || reason != "parse_error" || r["id"] != nil {
				t.Errorf("submit of %q: reply %v, want -32700/parse_error with id null", text, r)
			}
		}
		// A valid U+FFFD first, then the invalid bytes under the same id.
		first := submit(t, c, sid, "utf8-valid", "a\uFFFDb")
		r := atkRawReply(t, c, frame(22, "utf8-valid", "a\xffb"))
		if code, _ := atkErrCode(r); code != -32700 {
			t.Errorf("invalid bytes under the id of a valid U+FFFD input: reply %v, want -32700 (not a duplicate of %s)", r, first.AdmissionID)
		}
		atkAlive(t, c)
		db := fixtures.OpenStoreReadOnly(t, d.Home)
		var raw, valid int
		for _, row := range fixtures.Admissions(t, db, sid) {
			switch row.InputID {
			case "utf8-raw":
				raw++
			case "utf8-valid":
				valid++
			}
		}
		if raw != 0 || valid != 1 {
			t.Errorf("admissions: %d for the invalid frames (want 0), %d for the valid input (want 1)", raw, valid)
		}
	})

	t.Run("binary-frame", func(t *testing.T) {
		if err := c.Conn().Write(ctxT(t), websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":40,"method":"daemon.info"}`)); err != nil {
			t.Fatal(err)
		}
		raw, err := c.ReadRawResponse(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		json.Unmarshal(raw, &r)
		if code, reason := atkErrCode(r); code != -32600 || reason == "" {
			t.Errorf("binary frame reply %s, want -32600", raw)
		}
		atkAlive(t, c)
	})

	t.Run("flood", func(t *testing.T) {
		// Far more concurrent requests than limits.max_in_flight (64): each
		// gets a result or overloaded, nothing else, and the connection lives.
		f := d.Dial(t)
		const n = 300
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = atkCall(f, "session.list", map[string]any{"limit": 500}, nil)
			}()
		}
		close(start)
		wg.Wait()
		ok, overloaded := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case fixtures.ErrorReason(err) == "overloaded":
				overloaded++
			default:
				t.Errorf("flood: %v, want a result or overloaded", err)
			}
		}
		t.Logf("flood: %d answered, %d overloaded", ok, overloaded)
		atkAlive(t, f)
		atkAlive(t, c)
	})

	const maxFrame = 4 << 20 // limits.max_message_bytes default
	t.Run("4MiB-frame-accepted", func(t *testing.T) {
		f := d.Dial(t)
		head, tail := `{"jsonrpc":"2.0","id":50,"method":"daemon.info","params":{"pad":"`, `"}}`
		frame := head + strings.Repeat("x", maxFrame-len(head)-len(tail)) + tail
		if r := atkRawReply(t, f, frame); r["result"] == nil {
			t.Errorf("a frame of exactly 4 MiB: %.300v, want a result", r)
		}
	})

	t.Run("4MiB-plus-1-closes-1009-keeps-committed", func(t *testing.T) {
		f := d.Dial(t)
		rc := submit(t, f, sid, "before-big", "before the big frame")
		head, tail := `{"jsonrpc":"2.0","id":51,"method":"daemon.info","params":{"pad":"`, `"}}`
		frame := head + strings.Repeat("x", maxFrame+1-len(head)-len(tail)) + tail
		_ = f.SendText(ctxT(t), frame) // the server may close before it has read it all
		if st := f.WaitClosed(t, wait); st != websocket.StatusMessageTooBig {
			t.Errorf("close status %d, want 1009", st)
		}
		db := fixtures.OpenStoreReadOnly(t, d.Home)
		admissionRow(t, fixtures.Admissions(t, db, sid), rc.AdmissionID)
		atkAlive(t, c)
	})
}

// TestAttackSubmitThenVanish: a client sends prompt.submit and drops the TCP
// connection at once. The input is either committed (then the resubmission
// is a duplicate) or absent; either way it runs exactly once.
func TestAttackSubmitThenVanish(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	const rounds = 10
	committed := 0
	for i := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		conn, _, err := fixtures.DialRaw(ctx, d.Desc.URL, &websocket.DialOptions{HTTPHeader: fixtures.BearerHeader(d.Desc.Token), Subprotocols: []string{fixtures.Subprotocol}})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		in := fmt.Sprintf("vanish-%d", i)
		frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "prompt.submit",
			"params": map[string]any{"session_id": s.SessionID, "input_id": in, "text": "vanish text " + in}})
		if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
			t.Fatalf("write: %v", err)
		}
		if i%2 == 0 {
			conn.CloseNow() // TCP gone at once
		} else {
			conn.Close(websocket.StatusNormalClosure, "bye") // close handshake, never reads the reply
		}
		cancel()
		exists := false
		for _, r := range fixtures.Admissions(t, db, s.SessionID) {
			exists = exists || r.InputID == in
		}
		r := submit(t, c, s.SessionID, in, "vanish text "+in)
		if exists && !r.Duplicate {
			t.Errorf("%s was in the store but its resubmission is not a duplicate", in)
		}
		if r.Duplicate {
			committed++
		}
	}
	t.Logf("%d of %d vanished submits were committed before the resubmission", committed, rounds)
	rows := waitAllTerminal(t, db, s.SessionID)
	if len(rows) != rounds {
		t.Errorf("%d admissions for %d inputs", len(rows), rounds)
	}
	for _, r := range rows {
		if n := len(m.RequestsWithLastUser("vanish text " + r.InputID)); n != 1 || r.Outcome.String != "completed" {
			t.Errorf("%s: %s/%s, reached the model %d times", r.InputID, r.Status, r.Outcome.String, n)
		}
	}
}

// TestAttackUpgradeRefusals: Host (anti DNS-rebinding), Origin and token
// checks of GET /rpc, with hand-written requests.
func TestAttackUpgradeRefusals(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})
	u, err := url.Parse(d.Desc.URL)
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Host
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("daemon address %q, want 127.0.0.1:PORT", addr)
	}
	tok := d.Desc.Token
	local := "127.0.0.1:" + port
	bearer := [][2]string{{"Authorization", "Bearer " + tok}, {"Sec-WebSocket-Protocol", "sessiond.v1"}}
	withOrigin := func(o string) [][2]string { return append([][2]string{{"Origin", o}}, bearer...) }
	proto := func(p string) [][2]string { return [][2]string{{"Sec-WebSocket-Protocol", p}} }
	cases := []struct {
		name, host string
		hdr        [][2]string
		want       int
	}{
		{"ok", local, bearer, 101},
		{"host-localhost-upper", "LOCALHOST:" + port, bearer, 101},
		{"host-ipv6-loopback", "[::1]:" + port, bearer, 101},
		{"host-mapped-v6", "[::ffff:127.0.0.1]:" + port, bearer, 101},
		{"host-evil-suffix", "127.0.0.1.evil.example:" + port, bearer, 403},
		{"host-evil", "evil.example", bearer, 403},
		{"host-localhost-dot", "localhost.:" + port, bearer, 403},
		{"host-ipv6-zone", "[::1%25eth0]:" + port, bearer, 403},
		{"host-ipv6-zone-raw", "[fe80::1%eth0]:" + port, bearer, 403},
		{"host-empty", "", bearer, 403},
		{"host-127.1", "127.1:" + port, bearer, 403},
		{"host-0", "0.0.0.0:" + port, bearer, 403},
		{"host-decimal", "2130706433:" + port, bearer, 403},
		{"host-userinfo", local + "@evil.example", bearer, 400}, // refused as malformed by net/http
		{"host-localhost-evil-port", "localhost:evil.example", bearer, 403},
		{"host-port-out-of-range", "127.0.0.1:99999", bearer, 403},
		{"origin-evil", local, withOrigin("http://evil.example"), 403},
		{"origin-null", local, withOrigin("null"), 403},
		{"origin-blank", local, withOrigin(" "), 403},
		{"origin-loopback-not-listed", local, withOrigin("http://" + local), 403},
		{"no-token", local, proto("sessiond.v1"), 401},
		{"bearer-lower", local, [][2]string{{"Authorization", "bearer " + tok}}, 401},
		{"bearer-empty", local, [][2]string{{"Authorization", "Bearer "}}, 401},
		{"basic", local, [][2]string{{"Authorization", "Basic " + tok}}, 401},
		{"token-prefix-typo", local, proto("sessiond.v1, sessiond.tokenx" + tok), 401},
		{"token-partial", local, proto("sessiond.v1, sessiond.token." + tok[:len(tok)-1]), 401},
		{"token-extra", local, proto("sessiond.v1, sessiond.token." + tok + "x"), 401},
		{"token-empty", local, proto("sessiond.v1, sessiond.token."), 401},
		{"token-subprotocol-ok", local, proto("sessiond.v1, sessiond.token." + tok), 101},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if code, status := atkRawUpgrade(t, addr, "/rpc", tc.host, tc.hdr); code != tc.want {
				t.Errorf("Host %q, headers %q: got %d (%s), want %d", tc.host, tc.hdr, code, status, tc.want)
			}
		})
	}
	t.Run("token-in-query", func(t *testing.T) {
		if code, status := atkRawUpgrade(t, addr, "/rpc?token="+url.QueryEscape(tok), local, proto("sessiond.v1")); code != 401 {
			t.Errorf("token in the query: %d (%s), want 401", code, status)
		}
	})
}
