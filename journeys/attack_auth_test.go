package journeys

// Attack journeys of issue 7 against the real binary, one test per case:
// missing and wrong tokens, a token in the query string, a foreign Origin,
// DNS rebinding, cross-origin POSTs, oversized frames, an unauthenticated
// flood, the connection limit, file modes of the home and the secrecy of
// the token. Helpers start with "aa". evil.example only ever appears in
// headers: every connection goes to the daemon's own 127.0.0.1 port.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// aaTarget is a daemon under attack.
type aaTarget struct {
	d    *fixtures.Daemon
	m    *fixtures.FakeModel
	addr string // 127.0.0.1:PORT, the only address the attacks dial
	port string
	tok  string
}

// aaStart starts a daemon whose model is a fake one answering "ok", with
// extra config lines and extra command-line arguments.
func aaStart(t *testing.T, extra string, args ...string) *aaTarget {
	t.Helper()
	m := fixtures.NewFakeModel(t)
	m.Default(fixtures.Reply{Text: "ok"})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, extra), Args: args})
	return aaTargetOf(t, d, m)
}

func aaTargetOf(t *testing.T, d *fixtures.Daemon, m *fixtures.FakeModel) *aaTarget {
	t.Helper()
	u, err := url.Parse(d.Desc.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("daemon address %q, want 127.0.0.1:PORT", u.Host)
	}
	return &aaTarget{d: d, m: m, addr: u.Host, port: port, tok: d.Desc.Token}
}

// aaResponse is one HTTP response read off a raw connection.
type aaResponse struct {
	Code   int
	Status string
	Header http.Header
	Body   string
}

// aaSend writes raw (a hand-made HTTP/1.1 request) on a fresh TCP
// connection to addr and reads one response.
func aaSend(t *testing.T, addr, raw string) aaResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no HTTP response to %.200q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return aaResponse{Code: resp.StatusCode, Status: resp.Status, Header: resp.Header, Body: string(body)}
}

// aaRequest builds a raw HTTP/1.1 request (Content-Length set when body is
// not empty).
func aaRequest(method, target, host string, hdr [][2]string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	for _, kv := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", kv[0], kv[1])
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(body)
	return b.String()
}

// aaUpgrade sends a WebSocket upgrade of target with the Host header host
// and the extra headers hdr.
func aaUpgrade(t *testing.T, a *aaTarget, target, host string, hdr ...[2]string) aaResponse {
	t.Helper()
	up := [][2]string{{"Upgrade", "websocket"}, {"Connection", "Upgrade"}, {"Sec-WebSocket-Version", "13"},
		{"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, host)
	for _, kv := range append(up, hdr...) {
		fmt.Fprintf(&b, "%s: %s\r\n", kv[0], kv[1])
	}
	b.WriteString("\r\n")
	return aaSend(t, a.addr, b.String())
}

func aaBearer(tok string) [2]string { return [2]string{"Authorization", "Bearer " + tok} }
func aaProto(p string) [2]string    { return [2]string{"Sec-WebSocket-Protocol", p} }
func aaOrigin(o string) [2]string   { return [2]string{"Origin", o} }

var aaV1 = aaProto(fixtures.Subprotocol)

// aaRefused asserts that r is a refusal with status code: no upgrade, no
// CORS grant, and nothing of the token in it.
func aaRefused(t *testing.T, a *aaTarget, what string, r aaResponse, code int) {
	t.Helper()
	if r.Code != code {
		t.Errorf("%s: %s (%.200q), want %d", what, r.Status, r.Body, code)
	}
	if r.Header.Get("Upgrade") != "" || r.Header.Get("Sec-WebSocket-Accept") != "" {
		t.Errorf("%s: the refusal carries upgrade headers %v", what, r.Header)
	}
	aaNoCORS(t, what, r)
	if aaLeaks(r.Body+fmt.Sprint(r.Header), a.tok) != "" {
		t.Errorf("%s: the response reveals the token: %v %q", what, r.Header, r.Body)
	}
}

// aaNoCORS asserts that r grants nothing to a foreign page.
func aaNoCORS(t *testing.T, what string, r aaResponse) {
	t.Helper()
	for k, v := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("%s: CORS header %s: %q", what, k, v)
		}
	}
}

// aaLeaks returns the first piece of tok found in s: the token itself or
// any 16-character quarter of it (a truncated log value), else "".
func aaLeaks(s, tok string) string {
	pieces := []string{tok}
	for i := 0; i+16 <= len(tok); i += 16 {
		pieces = append(pieces, tok[i:i+16])
	}
	for _, p := range pieces {
		if p != "" && strings.Contains(s, p) {
			return p
		}
	}
	return ""
}

// aaRandomToken returns a token of the descriptor's shape that is not tok.
func aaRandomToken(tok string) string {
	b := make([]byte, len(tok)/2)
	rand.Read(b)
	if s := hex.EncodeToString(b); s != tok {
		return s
	}
	return strings.Repeat("0", len(tok))
}

// aaCount runs a COUNT(*) query on the store.
func aaCount(t *testing.T, a *aaTarget, query string) int {
	t.Helper()
	var n int
	if err := fixtures.OpenStoreReadOnly(t, a.d.Home).Get(&n, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// aaDialOpts are the options of an authenticated dial.
func aaDialOpts(tok string) *websocket.DialOptions {
	return &websocket.DialOptions{HTTPHeader: fixtures.BearerHeader(tok), Subprotocols: []string{fixtures.Subprotocol}}
}

// aaLibraryDial upgrades with the websocket library (what real clients
// use) and returns the HTTP status of the refusal (101 when it succeeded;
// the connection is then closed).
func aaLibraryDial(t *testing.T, rawURL string, opts *websocket.DialOptions) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, resp, err := fixtures.DialRaw(ctx, rawURL, opts)
	if err == nil {
		conn.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial %s: %v without an HTTP response", rawURL, err)
	}
	return resp.StatusCode
}

// TestAttackNoToken: an upgrade without the descriptor token (none at all,
// an empty one, the token only in a cookie a browser would attach) is
// refused 401 with WWW-Authenticate: Bearer before any upgrade. Catches an
// optional or bypassable auth check, and auth by ambient cookies.
func TestAttackNoToken(t *testing.T) {
	a := aaStart(t, "")
	local := a.addr
	if r := aaUpgrade(t, a, "/rpc", local, aaBearer(a.tok), aaV1); r.Code != http.StatusSwitchingProtocols {
		t.Fatalf("control: the same upgrade with the token got %s, want 101", r.Status)
	}
	cases := []struct {
		name string
		hdr  [][2]string
	}{
		{"nothing", nil},
		{"subprotocol-v1-only", [][2]string{aaV1}},
		{"bearer-no-value", [][2]string{{"Authorization", "Bearer"}, aaV1}},
		{"bearer-blank", [][2]string{{"Authorization", "Bearer "}, aaV1}},
		{"authorization-empty", [][2]string{{"Authorization", ""}, aaV1}},
		{"token-subprotocol-empty", [][2]string{aaProto("sessiond.v1, sessiond.token.")}},
		{"token-in-cookie", [][2]string{{"Cookie", "token=" + a.tok + "; sessiond.token=" + a.tok}, aaV1}},
		{"token-in-other-header", [][2]string{{"X-Sessiond-Token", a.tok}, {"Token", a.tok}, aaV1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := aaUpgrade(t, a, "/rpc", local, tc.hdr...)
			aaRefused(t, a, tc.name, r, http.StatusUnauthorized)
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer: %v", r.Header)
			}
		})
	}
	t.Run("refusal-closes-the-connection", func(t *testing.T) {
		// Without the token a client gets its 401 and nothing more: the
		// daemon does not keep the connection alive for a next request.
		conn := aaRefusedKeptOpen(t, a)
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("after the 401 the connection stayed open (read %d bytes, %v)", n, err)
		}
	})
	t.Run("plain-get", func(t *testing.T) {
		r := aaSend(t, a.addr, aaRequest("GET", "/rpc", local, nil, ""))
		aaRefused(t, a, "GET /rpc without upgrade or token", r, http.StatusUnauthorized)
	})
	t.Run("library-dial", func(t *testing.T) {
		if code := aaLibraryDial(t, a.d.Desc.URL, &websocket.DialOptions{Subprotocols: []string{fixtures.Subprotocol}}); code != http.StatusUnauthorized {
			t.Errorf("websocket.Dial without a token: %d, want 401", code)
		}
	})
	atkAlive(t, a.d.Dial(t))
}

// TestAttackWrongToken: wrong tokens are refused 401 both as a bearer and
// as a subprotocol: a random one, one differing in the first or last
// character, prefixes of the right one, extensions of it, and the right one
// in upper case. Catches a comparison of a prefix (strings.HasPrefix, a
// compare of the first N bytes), a case-insensitive compare, and a token
// accepted by containment.
func TestAttackWrongToken(t *testing.T) {
	a := aaStart(t, "")
	tok, local := a.tok, a.addr
	if r := aaUpgrade(t, a, "/rpc", local, aaProto("sessiond.v1, sessiond.token."+tok)); r.Code != http.StatusSwitchingProtocols {
		t.Fatalf("control: the token as a subprotocol got %s, want 101", r.Status)
	}
	flip := func(i int) string {
		b := []byte(tok)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		return string(b)
	}
	variants := []struct{ name, tok string }{
		{"random", aaRandomToken(tok)},
		{"first-char-changed", flip(0)},
		{"last-char-changed", flip(len(tok) - 1)},
		{"prefix-one-char", tok[:1]},
		{"prefix-half", tok[:len(tok)/2]},
		{"prefix-all-but-one", tok[:len(tok)-1]},
		{"extension-one-char", tok + "0"},
		{"doubled", tok + tok},
		{"inside-longer", "x" + tok + "x"},
	}
	if up := strings.ToUpper(tok); up != tok {
		variants = append(variants, struct{ name, tok string }{"upper-case", up})
	} else {
		t.Logf("the token %q has no letters; no case-changed variant", tok)
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := aaUpgrade(t, a, "/rpc", local, aaBearer(v.tok), aaV1)
			aaRefused(t, a, "bearer "+v.name, r, http.StatusUnauthorized)
			r = aaUpgrade(t, a, "/rpc", local, aaProto("sessiond.v1, sessiond.token."+v.tok))
			aaRefused(t, a, "subprotocol "+v.name, r, http.StatusUnauthorized)
		})
	}
	t.Run("library-dial-prefix", func(t *testing.T) {
		if code := aaLibraryDial(t, a.d.Desc.URL, aaDialOpts(tok[:len(tok)-1])); code != http.StatusUnauthorized {
			t.Errorf("websocket.Dial with a prefix of the token: %d, want 401", code)
		}
	})
	atkAlive(t, a.d.Dial(t))
}

// TestAttackTokenInQueryRefusedAndNotLogged: the token in the URL (query
// parameters of every likely name, on /rpc and elsewhere) never
// authenticates, and the daemon at its most verbose log level writes none
// of it. Catches a "?token=" convenience and an access log of request URLs.
func TestAttackTokenInQueryRefusedAndNotLogged(t *testing.T) {
	a := aaStart(t, "", "--log-level", "debug")
	tok, local := a.tok, a.addr
	q := url.QueryEscape(tok)
	for _, target := range []string{
		"/rpc?token=" + q, "/rpc?access_token=" + q, "/rpc?sessiond.token." + q, "/rpc?bearer=" + q,
		"/rpc?Authorization=Bearer%20" + q, "/rpc?token=" + q + "&token=" + q, "/rpc?" + q,
	} {
		r := aaUpgrade(t, a, target, local, aaV1)
		aaRefused(t, a, "upgrade of "+target, r, http.StatusUnauthorized)
	}
	// Elsewhere: wrong paths, a foreign Host, a foreign Origin.
	for _, tc := range []struct {
		target, host string
		hdr          [][2]string
		code         int
	}{
		{"/rpc/?token=" + q, local, nil, http.StatusNotFound},
		{"/?token=" + q, local, nil, http.StatusNotFound},
		{"/healthz?token=" + q, local, nil, http.StatusOK},
		{"/rpc?token=" + q, "evil.example:" + a.port, nil, http.StatusForbidden},
		{"/rpc?token=" + q, local, [][2]string{aaOrigin("http://evil.example")}, http.StatusForbidden},
	} {
		r := aaUpgrade(t, a, tc.target, tc.host, append(tc.hdr, aaV1)...)
		aaRefused(t, a, fmt.Sprintf("upgrade of %s with Host %s", tc.target, tc.host), r, tc.code)
	}
	if code := aaLibraryDial(t, a.d.Desc.URL+"?token="+q, &websocket.DialOptions{Subprotocols: []string{fixtures.Subprotocol}}); code != http.StatusUnauthorized {
		t.Errorf("websocket.Dial with the token in the query: %d, want 401", code)
	}
	// An authenticated connection opens and closes, so the debug log has
	// something to say; then the daemon stops so every line is written.
	c := a.d.Dial(t)
	atkAlive(t, c)
	c.Close()
	if code := a.d.SIGTERM(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	out := a.d.AllStderr() + a.d.Stdout()
	if !strings.Contains(out, "level=DEBUG") {
		t.Fatalf("--log-level debug wrote no debug line, so this test proves nothing; stderr:\n%s", out)
	}
	if p := aaLeaks(out, tok); p != "" {
		t.Fatalf("the daemon's output contains %q of the token:\n%s", p, out)
	}
}

// TestAttackForeignOrigin: a browser page of another origin cannot open
// /rpc, even with the token: every Origin not listed in allowed_origins
// exactly (look-alikes, other schemes and ports, "null", loopback pages,
// two Origin headers) gets 403, before the token is looked at. Catches a
// prefix or host-only match, a trusted loopback origin, and a check that
// reads only the first Origin header.
func TestAttackForeignOrigin(t *testing.T) {
	const listed = "http://ide.example"
	a := aaStart(t, "allowed_origins: [\""+listed+"\"]")
	local := a.addr
	for _, ok := range [][][2]string{{aaBearer(a.tok), aaV1}, {aaOrigin(listed), aaBearer(a.tok), aaV1}} {
		if r := aaUpgrade(t, a, "/rpc", local, ok...); r.Code != http.StatusSwitchingProtocols {
			t.Fatalf("control %q: %s, want 101", ok, r.Status)
		} else {
			aaNoCORS(t, "accepted upgrade", r)
		}
	}
	cases := []struct {
		name string
		hdr  [][2]string
	}{
		{"evil", [][2]string{aaOrigin("http://evil.example")}},
		{"evil-https", [][2]string{aaOrigin("https://evil.example")}},
		{"listed-as-prefix", [][2]string{aaOrigin(listed + ".evil.example")}},
		{"listed-as-suffix", [][2]string{aaOrigin("http://evil.example/" + listed)}},
		{"listed-other-port", [][2]string{aaOrigin(listed + ":8080")}},
		{"listed-other-scheme", [][2]string{aaOrigin("https://ide.example")}},
		{"listed-with-path", [][2]string{aaOrigin(listed + "/")}},
		{"null", [][2]string{aaOrigin("null")}},
		{"file", [][2]string{aaOrigin("file://")}},
		{"loopback-page", [][2]string{aaOrigin("http://" + local)}},
		{"localhost-page", [][2]string{aaOrigin("http://localhost:" + a.port)}},
		{"blank", [][2]string{aaOrigin("")}},
		{"listed-then-evil", [][2]string{aaOrigin(listed), aaOrigin("http://evil.example")}},
		{"evil-then-listed", [][2]string{aaOrigin("http://evil.example"), aaOrigin(listed)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := aaUpgrade(t, a, "/rpc", local, append(tc.hdr, aaBearer(a.tok), aaV1)...)
			aaRefused(t, a, tc.name+" with the token", r, http.StatusForbidden)
			r = aaUpgrade(t, a, "/rpc", local, append(tc.hdr, aaV1)...)
			aaRefused(t, a, tc.name+" without a token", r, http.StatusForbidden)
		})
	}
	t.Run("library-dial", func(t *testing.T) {
		opts := aaDialOpts(a.tok)
		opts.HTTPHeader.Set("Origin", "http://evil.example")
		if code := aaLibraryDial(t, a.d.Desc.URL, opts); code != http.StatusForbidden {
			t.Errorf("websocket.Dial with a foreign Origin: %d, want 403", code)
		}
	})
	atkAlive(t, a.d.Dial(t))
}

// TestAttackDNSRebinding: a page of evil.example whose name was rebound to
// 127.0.0.1 sends Host: evil.example:PORT and Origin: http://evil.example:PORT
// (a same-origin request as far as the browser knows). Every path refuses
// it with 403, with or without the token, and tells it nothing about the
// daemon. Catches a Host check missing on a path, a Host check after the
// token check (a token oracle), and a fingerprint in the refusal.
func TestAttackDNSRebinding(t *testing.T) {
	a := aaStart(t, "")
	evilHost := "evil.example:" + a.port
	evilOrigin := aaOrigin("http://" + evilHost)
	for _, host := range []string{a.addr, "localhost:" + a.port} {
		if r := aaUpgrade(t, a, "/rpc", host, aaBearer(a.tok), aaV1); r.Code != http.StatusSwitchingProtocols {
			t.Fatalf("control with Host %s: %s, want 101", host, r.Status)
		}
	}
	for _, host := range []string{evilHost, "evil.example", "EVIL.EXAMPLE:" + a.port, "127.0.0.1.evil.example:" + a.port} {
		for _, hdr := range [][][2]string{
			{evilOrigin, aaBearer(a.tok), aaV1},
			{evilOrigin, aaV1},
			{aaBearer(a.tok), aaV1},
		} {
			r := aaUpgrade(t, a, "/rpc", host, hdr...)
			aaRefused(t, a, fmt.Sprintf("upgrade with Host %s, %q", host, hdr), r, http.StatusForbidden)
		}
	}
	// Plain requests a rebinding page can make (and read the answer of).
	for _, method := range []string{"GET", "HEAD", "POST", "OPTIONS"} {
		for _, target := range []string{"/rpc", "/healthz", "/", "/rpc/", "/favicon.ico", "/nope?token=x"} {
			r := aaSend(t, a.addr, aaRequest(method, target, evilHost, [][2]string{evilOrigin}, ""))
			what := fmt.Sprintf("%s %s with Host %s", method, target, evilHost)
			aaRefused(t, a, what, r, http.StatusForbidden)
			if strings.Contains(strings.ToLower(r.Body), "sessiond") || strings.Contains(r.Body, "/rpc") {
				t.Errorf("%s: the refusal fingerprints the daemon: %q", what, r.Body)
			}
		}
	}
	t.Run("library-dial", func(t *testing.T) {
		opts := aaDialOpts(a.tok)
		opts.Host = evilHost
		opts.HTTPHeader.Set("Origin", "http://"+evilHost)
		if code := aaLibraryDial(t, a.d.Desc.URL, opts); code != http.StatusForbidden {
			t.Errorf("websocket.Dial with Host %s: %d, want 403", evilHost, code)
		}
	})
	atkAlive(t, a.d.Dial(t))
}

// TestAttackCrossOriginPOST: a web page can POST to any local port without
// a preflight (text/plain, form encodings). A JSON-RPC session.create sent
// that way, to every path the daemon serves and to look-alikes, gets a
// non-2xx answer without any CORS grant and has no effect: the store holds
// no session and no admission. A preflight grants nothing either. Catches
// an HTTP JSON-RPC endpoint (even one behind the token), a CORS middleware,
// and a handler that acts on POST bodies.
func TestAttackCrossOriginPOST(t *testing.T) {
	a := aaStart(t, "")
	cwd := t.TempDir()
	create, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session.create",
		"params": map[string]any{"cwd": cwd, "title": "csrf", "request_id": "csrf"}})
	body := string(create)
	local := a.addr
	evil := aaOrigin("http://evil.example")
	form := "jsonrpc=2.0&id=1&method=session.create&params=" + url.QueryEscape(`{"cwd":"`+cwd+`"}`)
	multipart := "--xx\r\nContent-Disposition: form-data; name=\"rpc\"\r\n\r\n" + body + "\r\n--xx--\r\n"
	variants := []struct {
		name, host, body string
		hdr              [][2]string
	}{
		{"text-plain", local, body, [][2]string{evil, {"Content-Type", "text/plain"}}},
		{"form", local, form, [][2]string{evil, {"Content-Type", "application/x-www-form-urlencoded"}}},
		{"multipart", local, multipart, [][2]string{evil, {"Content-Type", "multipart/form-data; boundary=xx"}}},
		{"json-with-token", local, body, [][2]string{evil, {"Content-Type", "application/json"}, aaBearer(a.tok)}},
		{"json-token-no-origin", local, body, [][2]string{{"Content-Type", "application/json"}, aaBearer(a.tok)}},
		{"rebound-host", "evil.example:" + a.port, body, [][2]string{aaOrigin("http://evil.example:" + a.port), {"Content-Type", "text/plain"}}},
	}
	// Every path of daemon/server.go (GET /rpc, GET /healthz, the "/"
	// catch-all) and look-alikes.
	paths := []string{"/rpc", "/rpc/", "/healthz", "/", "/rpc?x=1", "/RPC", "/rpc/../rpc", "//rpc", "/jsonrpc", "/unknown"}
	for _, p := range paths {
		for _, v := range variants {
			r := aaSend(t, a.addr, aaRequest("POST", p, v.host, v.hdr, v.body))
			if r.Code >= 200 && r.Code < 300 {
				t.Errorf("POST %s (%s): %s %q, want a refusal", p, v.name, r.Status, r.Body)
			}
			aaNoCORS(t, "POST "+p+" ("+v.name+")", r)
		}
		pre := aaSend(t, a.addr, aaRequest("OPTIONS", p, local, [][2]string{evil,
			{"Access-Control-Request-Method", "POST"}, {"Access-Control-Request-Headers", "content-type, authorization"}}, ""))
		if pre.Code >= 200 && pre.Code < 300 {
			t.Errorf("preflight of %s: %s, want a refusal", p, pre.Status)
		}
		aaNoCORS(t, "preflight of "+p, pre)
	}
	if n := aaCount(t, a, `SELECT COUNT(*) FROM sessions`); n != 0 {
		t.Fatalf("%d sessions after the cross-origin POSTs, want none", n)
	}
	if n := aaCount(t, a, `SELECT COUNT(*) FROM session_admissions`); n != 0 {
		t.Fatalf("%d admissions after the cross-origin POSTs, want none", n)
	}
	// Control: the same request over the WebSocket does create a session,
	// and the count above sees it.
	c := a.d.Dial(t)
	if err := c.Call(ctxT(t), "session.create", map[string]any{"cwd": cwd, "title": "csrf", "request_id": "csrf"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := aaCount(t, a, `SELECT COUNT(*) FROM sessions`); n != 1 {
		t.Fatalf("control: %d sessions after one session.create, want 1", n)
	}
}

// aaSubmitFrame is a prompt.submit request of exactly size bytes (its text
// is padding).
func aaSubmitFrame(t *testing.T, id int, sessionID, inputID string, size int) string {
	t.Helper()
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"prompt.submit","params":{"session_id":%q,"input_id":%q,"text":"`, id, sessionID, inputID)
	tail := `"}}`
	pad := size - len(head) - len(tail)
	if pad < 1 {
		t.Fatalf("frame size %d too small", size)
	}
	return head + strings.Repeat("x", pad) + tail
}

// aaMaskedFrame is a client frame (FIN, opcode text, masked) whose header
// claims length declared, carrying payload.
func aaMaskedFrame(declared uint64, payload []byte) []byte {
	f := []byte{0x81, 0x80 | 127}
	f = binary.BigEndian.AppendUint64(f, declared)
	key := [4]byte{1, 2, 3, 4}
	f = append(f, key[:]...)
	for i, b := range payload {
		f = append(f, b^key[i%4])
	}
	return f
}

// TestAttackOversizedFrame: with limits.max_message_bytes 65536, a frame of
// exactly 65536 bytes is served; one byte more, the same size in many small
// fragments, or a header claiming a 1 TiB frame close the connection with
// 1009. The daemon keeps serving, what was committed before stays, and no
// byte of the oversized messages is stored. Catches the limit not taken
// from config (4 MiB would accept these), an off-by-one, a per-frame rather
// than per-message limit, and a buffer allocated from the declared length.
func TestAttackOversizedFrame(t *testing.T) {
	const limit = 65536
	a := aaStart(t, fmt.Sprintf("limits: {max_message_bytes: %d}", limit))
	c := a.d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	before := submit(t, c, s.SessionID, "before", "before the big frames")
	if out := waitTurn(t, c, before.AdmissionID); out != "completed" {
		t.Fatalf("turn before the big frames: %s", out)
	}

	t.Run("at-limit-served", func(t *testing.T) {
		f := a.d.Dial(t)
		r := atkRawReply(t, f, aaSubmitFrame(t, 1, s.SessionID, "at-limit", limit))
		if r["result"] == nil {
			t.Fatalf("a frame of exactly %d bytes: %.300v, want a receipt", limit, r)
		}
	})
	t.Run("one-byte-over", func(t *testing.T) {
		f := a.d.Dial(t)
		_ = f.SendText(ctxT(t), aaSubmitFrame(t, 2, s.SessionID, "over", limit+1)) // the server may close mid-write
		if st := f.WaitClosed(t, wait); st != websocket.StatusMessageTooBig {
			t.Errorf("a frame of %d bytes: close %d, want 1009", limit+1, st)
		}
	})
	t.Run("fragmented", func(t *testing.T) {
		f := a.d.Dial(t)
		frame := aaSubmitFrame(t, 3, s.SessionID, "fragmented", 2*limit)
		ctx := ctxT(t)
		if w, err := f.Conn().Writer(ctx, websocket.MessageText); err == nil {
			for i := 0; i < len(frame); i += 1024 {
				if _, err := w.Write([]byte(frame[i:min(i+1024, len(frame))])); err != nil {
					break // closed by the server
				}
			}
			w.Close()
		}
		if st := f.WaitClosed(t, wait); st != websocket.StatusMessageTooBig {
			t.Errorf("a %d-byte message in 1 KiB fragments: close %d, want 1009", 2*limit, st)
		}
	})
	t.Run("claims-1TiB", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", a.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(wait))
		up := "GET /rpc HTTP/1.1\r\nHost: " + a.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: sessiond.v1\r\nAuthorization: Bearer " + a.tok + "\r\n\r\n"
		if _, err := io.WriteString(conn, up); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		payload := []byte(aaSubmitFrame(t, 4, s.SessionID, "claimed", limit+1))
		conn.Write(aaMaskedFrame(1<<40, payload)) // the server may close mid-write
		// The server's close frame: 0x88, a length, then the status.
		hdr := make([]byte, 4)
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatalf("no close frame after a frame claiming 1 TiB: %v", err)
		}
		if hdr[0] != 0x88 || binary.BigEndian.Uint16(hdr[2:]) != uint16(websocket.StatusMessageTooBig) {
			t.Errorf("after a frame claiming 1 TiB the server sent % x, want a close frame with 1009", hdr)
		}
	})

	// The daemon serves: the first connection, and a new one.
	atkAlive(t, c)
	atkAlive(t, a.d.Dial(t))
	db := fixtures.OpenStoreReadOnly(t, a.d.Home)
	rows := waitAllTerminal(t, db, s.SessionID)
	var inputs []string
	for _, r := range rows {
		inputs = append(inputs, r.InputID)
		if r.Outcome.String != "completed" {
			t.Errorf("admission %s: %s/%s, want completed", r.InputID, r.Status, r.Outcome.String)
		}
	}
	if !slices.Equal(inputs, []string{"before", "at-limit"}) {
		t.Fatalf("admissions %q, want only [before at-limit]: an oversized message was stored, or a committed one lost", inputs)
	}
}

// aaFDs returns the number of open file descriptors of pid, or -1 when
// /proc cannot tell.
func aaFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// aaPct returns the p-th percentile of ds (sorted in place).
func aaPct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

// aaRound is one round of the real client: create a session, subscribe,
// submit a prompt, wait for its turn to complete against the fake model.
// It returns the latency of each call and of the whole turn.
func aaRound(t *testing.T, c *fixtures.Client, cwd, tag string, i int) (calls []time.Duration, turn time.Duration) {
	t.Helper()
	var s snapshot
	start := time.Now()
	if err := c.Call(ctxT(t), "session.create", map[string]any{"cwd": cwd, "request_id": fmt.Sprintf("%s-%d", tag, i)}, &s); err != nil {
		t.Fatalf("real client, session.create %s-%d: %v", tag, i, err)
	}
	calls = append(calls, time.Since(start))
	t0 := time.Now()
	resume(t, c, s.SessionID)
	calls = append(calls, time.Since(t0))
	t0 = time.Now()
	r := submit(t, c, s.SessionID, "in", fmt.Sprintf("%s prompt %d", tag, i))
	calls = append(calls, time.Since(t0))
	if out := waitTurn(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("real client, turn %s-%d: %s", tag, i, out)
	}
	return calls, time.Since(t0)
}

// aaFloodKinds name the unauthenticated attempts of the flood.
var aaFloodKinds = []string{"no-token upgrade", "wrong-token upgrade", "silent connect", "garbage bytes", "foreign Host with query token"}

// aaFloodAttempt makes one unauthenticated attempt of kind k against addr
// and returns what came back: an HTTP status code, "eof" (closed without a
// response), "sent" (nothing to read), or "error: …".
func aaFloodAttempt(addr, port string, k int, garbage []byte) string {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "dial error: " + err.Error()
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	upgrade := func(host, target string, extra string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: sessiond.v1\r\n" + extra + "\r\n"
	}
	var req string
	switch k {
	case 0:
		req = upgrade(addr, "/rpc", "")
	case 1:
		req = upgrade(addr, "/rpc", "Authorization: Bearer "+aaRandomToken(strings.Repeat("0", 64))+"\r\n")
	case 2:
		// Connect, send nothing, go away: half of them with a reset.
		if tc, ok := conn.(*net.TCPConn); ok && garbage[0]%2 == 0 {
			tc.SetLinger(0)
		}
		return "sent"
	case 3:
		req = string(garbage) + "\r\n\r\n"
	case 4:
		req = upgrade("evil.example:"+port, "/rpc?token="+aaRandomToken(strings.Repeat("0", 64)), "Origin: http://evil.example:"+port+"\r\n")
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return "error: " + err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "eof"
		}
		return "error: " + err.Error()
	}
	resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

// aaRefusedKeptOpen sends an upgrade without a token on a keep-alive
// connection, reads the 401 and returns the connection, still open on
// this side.
func aaRefusedKeptOpen(t *testing.T, a *aaTarget) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", a.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.SetDeadline(time.Now().Add(wait))
	io.WriteString(conn, "GET /rpc HTTP/1.1\r\nHost: "+a.addr+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: sessiond.v1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		conn.Close()
		t.Fatalf("upgrade without a token: %v %v, want 401", resp, err)
	}
	resp.Body.Close()
	return conn
}

// TestAttackUnauthenticatedFlood: 10,000 unauthenticated connection
// attempts (no token, wrong tokens, connects that send nothing, garbage
// bytes, rebinding requests with a token in the query), 32 at a time, while
// 150 more connections sit idle or half-way through their headers. A real
// client meanwhile creates sessions and runs turns against the fake model:
// every one of its calls succeeds. No attempt is upgraded, each gets its
// refusal, and afterwards the daemon's descriptors return to the baseline.
// Catches an accept loop that stalls or dies under load, a refusal path
// that leaks a descriptor or a goroutine holding one, and a daemon that
// stops answering its real client.
func TestAttackUnauthenticatedFlood(t *testing.T) {
	const attempts, workers, silent, partial, refusedIdle = 10000, 32, 100, 50, 100
	a := aaStart(t, "")
	pid := a.d.PID()
	c := a.d.Dial(t)
	cwd := t.TempDir()
	var quietCalls, quietTurns []time.Duration
	for i := range 5 {
		calls, turn := aaRound(t, c, cwd, "quiet", i)
		quietCalls, quietTurns = append(quietCalls, calls...), append(quietTurns, turn)
	}
	base := aaFDs(pid)
	if base < 0 {
		t.Logf("no /proc/%d/fd: descriptor counts are not checked", pid)
	}

	// Idle connections: some send nothing, some stop half-way through
	// their headers. They stay open during the whole flood.
	var held []net.Conn
	t.Cleanup(func() {
		for _, h := range held {
			h.Close()
		}
	})
	for i := range silent + partial {
		h, err := net.DialTimeout("tcp", a.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		held = append(held, h)
		if i >= silent {
			io.WriteString(h, "GET /rpc HTTP/1.1\r\nHost: "+a.addr+"\r\nUpgrade: websocket\r\n")
		}
	}
	// Refused, then left open by the client: the daemon must close them
	// itself, or any local process could pin its descriptors for free.
	for range refusedIdle {
		h := aaRefusedKeptOpen(t, a)
		held = append(held, h)
	}
	kept := held[silent+partial:]
	held = held[:silent+partial]
	t.Cleanup(func() {
		for _, h := range kept {
			h.Close()
		}
	})
	peak := base
	if base >= 0 {
		// The count sees them, so the return to the baseline below means
		// something.
		fixtures.Eventually(t, wait, "the daemon holding the idle connections", func() bool {
			peak = max(peak, aaFDs(pid))
			return peak >= base+(silent+partial)*9/10
		})
	}

	var (
		next    atomic.Int64
		mu      sync.Mutex
		results = make([]map[string]int, len(aaFloodKinds))
	)
	for k := range results {
		results[k] = map[string]int{}
	}
	done := make(chan struct{})
	floodStart := time.Now()
	var floodTime time.Duration
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				local := make([]map[string]int, len(aaFloodKinds))
				for k := range local {
					local[k] = map[string]int{}
				}
				garbage := make([]byte, 600)
				for {
					i := next.Add(1) - 1
					if i >= attempts {
						break
					}
					k := int(i) % len(aaFloodKinds)
					rand.Read(garbage)
					n := 16 + int(garbage[0])*2
					local[k][aaFloodAttempt(a.addr, a.port, k, garbage[1:n])]++
				}
				mu.Lock()
				for k := range local {
					for r, n := range local[k] {
						results[k][r] += n
					}
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		floodTime = time.Since(floodStart)
	}()

	// The real client works through the flood.
	var floodCalls, floodTurns []time.Duration
	rounds := 0
	for flooding := true; flooding; {
		select {
		case <-done:
			flooding = false
		default:
		}
		calls, turn := aaRound(t, c, cwd, "flood", rounds)
		rounds++
		if flooding {
			floodCalls, floodTurns = append(floodCalls, calls...), append(floodTurns, turn)
		}
		if base >= 0 {
			peak = max(peak, aaFDs(pid))
		}
	}
	<-done
	// The idle connections go away; the refused ones stay open on this
	// side until the end of the test.
	for _, h := range held {
		h.Close()
	}
	t.Logf("flood: %d attempts in %v (%d workers; %d idle connections and %d refused ones held open by the client); real client: %d rounds during the flood",
		attempts, floodTime.Round(time.Millisecond), workers, silent+partial, refusedIdle, len(floodTurns))
	t.Logf("real client calls: quiet p50 %v p99 %v; during the flood p50 %v p99 %v (n=%d)",
		aaPct(quietCalls, 50), aaPct(quietCalls, 99), aaPct(floodCalls, 50), aaPct(floodCalls, 99), len(floodCalls))
	t.Logf("real client turns (submit to turn.completed): quiet p50 %v; during the flood p50 %v p99 %v",
		aaPct(quietTurns, 50), aaPct(floodTurns, 50), aaPct(floodTurns, 99))
	for k, name := range aaFloodKinds {
		t.Logf("flood %s: %v", name, results[k])
	}
	if len(floodTurns) == 0 {
		t.Errorf("the real client finished no round while the flood ran (%v): nothing was measured under load", floodTime)
	}
	want := map[int]string{0: "401", 1: "401", 4: "403"}
	for k, name := range aaFloodKinds {
		for r, n := range results[k] {
			switch {
			case r == "101":
				t.Errorf("flood %s: %d attempts were upgraded", name, n)
			case strings.HasPrefix(r, "dial error"):
				t.Errorf("flood %s: %d connections could not even be made: %s", name, n, r)
			case want[k] != "" && r != want[k]:
				t.Errorf("flood %s: %d attempts got %s, want %s", name, n, r, want[k])
			}
		}
	}
	// The daemon serves a new client, and lets go of the flood's descriptors.
	atkAlive(t, a.d.Dial(t))
	if base >= 0 {
		var after int
		fixtures.Poll(wait, func() bool { after = aaFDs(pid); return after <= base+8 })
		t.Logf("daemon descriptors: %d before, %d at the peak, %d after", base, peak, after)
		if after > base+8 {
			t.Fatalf("the daemon still holds %d descriptors after the flood (baseline %d, peak %d; %d refused connections are still open on the client's side)",
				after, base, peak, refusedIdle)
		}
	}
}

// aaDialAccepted dials with the token until the daemon accepts the
// connection (a just-closed connection may still hold its slot for a
// moment) and returns the working client. A refusal other than 1013 fails
// the test.
func aaDialAccepted(t *testing.T, a *aaTarget) *fixtures.Client {
	t.Helper()
	var c *fixtures.Client
	fixtures.Eventually(t, wait, "a free connection slot", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		conn, _, err := fixtures.DialRaw(ctx, a.d.Desc.URL, aaDialOpts(a.tok))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		cl := fixtures.NewClient(t, conn)
		if err := atkCall(cl, "daemon.info", nil, nil); err == nil {
			c = cl
			return true
		}
		if st := cl.WaitClosed(t, wait); st != websocket.StatusTryAgainLater {
			t.Fatalf("a connection was refused with close %d, want 1013 or a working connection", st)
		}
		return false
	})
	return c
}

// aaWantOverloaded dials with the token and asserts the connection is
// closed with 1013 and a reason that says overloaded.
func aaWantOverloaded(t *testing.T, a *aaTarget, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, resp, err := fixtures.DialRaw(ctx, a.d.Desc.URL, aaDialOpts(a.tok))
	if err != nil {
		t.Fatalf("%s: the upgrade failed (%v %v); want an upgrade closed with 1013", what, resp, err)
	}
	cl := fixtures.NewClient(t, conn)
	defer cl.Close()
	if st := cl.WaitClosed(t, wait); st != websocket.StatusTryAgainLater {
		t.Fatalf("%s: close %d (%v), want 1013", what, st, cl.Err())
	}
	var ce websocket.CloseError
	if !errors.As(cl.Err(), &ce) || !strings.Contains(ce.Reason, "overloaded") {
		t.Fatalf("%s: close reason %q, want one saying overloaded", what, ce.Reason)
	}
}

// TestAttackMaxConnectionsOverloaded: with limits.max_connections 3 the
// fourth connection is closed with 1013 and a reason saying overloaded,
// the first three keep working, unauthenticated attempts are still told
// 401 (they take no slot), refused connections take no slot either, and
// closing one connection frees exactly one slot. Catches an unbounded
// daemon, a limit that counts refused or closed connections, and a refusal
// without a clear status.
func TestAttackMaxConnectionsOverloaded(t *testing.T) {
	a := aaStart(t, "limits: {max_connections: 3}")
	conns := []*fixtures.Client{aaDialAccepted(t, a), aaDialAccepted(t, a), aaDialAccepted(t, a)}
	aaWantOverloaded(t, a, "the fourth connection")
	for i, c := range conns {
		if err := atkCall(c, "daemon.info", nil, nil); err != nil {
			t.Fatalf("connection %d after the refusal: %v", i+1, err)
		}
	}
	aaRefused(t, a, "an unauthenticated upgrade while full", aaUpgrade(t, a, "/rpc", a.addr, aaV1), http.StatusUnauthorized)
	for i := range 10 {
		aaWantOverloaded(t, a, fmt.Sprintf("refused connection %d", i+2))
	}
	conns[0].Close()
	conns[0] = aaDialAccepted(t, a)
	aaWantOverloaded(t, a, "a connection after the freed slot was taken again")
	for i, c := range conns {
		if err := atkCall(c, "daemon.info", nil, nil); err != nil {
			t.Fatalf("connection %d at the end: %v", i+1, err)
		}
	}
}

// aaMode returns the permission bits of path.
func aaMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	return st.Mode().Perm()
}

// aaWantPrivate asserts the modes of a running daemon's home: the home
// 0700, daemon.json, daemon.lock and state.db 0600, and SQLite's -wal and
// -shm (when present) not accessible to the group or others.
func aaWantPrivate(t *testing.T, home string) {
	t.Helper()
	if m := aaMode(t, home); m != 0o700 {
		t.Errorf("home mode %v, want 0700", m)
	}
	for _, f := range []string{"daemon.json", "daemon.lock", "state.db"} {
		if m := aaMode(t, filepath.Join(home, f)); m != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, m)
		}
	}
	for _, f := range []string{"state.db-wal", "state.db-shm"} {
		if st, err := os.Stat(filepath.Join(home, f)); err == nil && st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v, want no group or other access", f, st.Mode().Perm())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(home, ".daemon.json.*")); len(left) > 0 {
		t.Errorf("temporary descriptor files left: %q", left)
	}
}

// aaStartHome starts a daemon (with a fake model) on home.
func aaStartHome(t *testing.T, home string) *fixtures.Daemon {
	t.Helper()
	return fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: home, Config: fixtures.FakeModelConfig(fixtures.NewFakeModel(t), "")})
}

// TestHomeAndDescriptorModes: after start the home is 0700 and daemon.json,
// daemon.lock and state.db are 0600, for a fresh home (the harness creates
// it 0700, so the daemon's own MkdirAll is not what is tested there) and
// for one that already exists with looser modes (0755, 0777, 0750, 0711):
// the daemon tightens an existing home rather than refusing to start (a
// home made with "mkdir -p" under umask 022 is the common case, and its
// files must be private whoever created the directory). A stale
// world-readable daemon.json is replaced by a private one. Catches a
// descriptor written with the umask's mode, a home left traversable, and a
// store created 0644.
func TestHomeAndDescriptorModes(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "state", "sessiond")
		d := aaStartHome(t, home)
		createSession(t, d.Dial(t), map[string]any{}) // a write, so the WAL exists
		aaWantPrivate(t, home)
	})
	for _, mode := range []os.FileMode{0o755, 0o777, 0o750, 0o711} {
		t.Run(fmt.Sprintf("existing-%#o", mode), func(t *testing.T) {
			home := t.TempDir()
			stale := `{"pid": 1, "url": "ws://127.0.0.1:1/rpc", "token": "stale", "protocol": 1}`
			if err := os.WriteFile(filepath.Join(home, "daemon.json"), []byte(stale), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(home, "daemon.json"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(home, mode); err != nil {
				t.Fatal(err)
			}
			d := aaStartHome(t, home)
			if d.Desc.Token == "stale" || d.Desc.PID != d.PID() {
				t.Fatalf("the stale descriptor was not replaced: %+v", d.Desc)
			}
			createSession(t, d.Dial(t), map[string]any{})
			aaWantPrivate(t, home)
		})
	}
}

// TestTokenNeverLogged: a daemon at --log-level debug goes through a full
// session (approvals granted and denied, a clarify answer, a failed turn,
// an interrupted one, a malformed and an oversized frame) and through
// refused upgrades carrying the token or pieces of it (prefixes,
// extensions, query parameters, foreign Host and Origin), then stops and
// restarts. Neither token, nor a 16-character piece of one, appears in its
// stdout or stderr, in any file of the home except daemon.json, in the log
// directory, or in what the model received (tool output included). Catches
// a logged header, URL or descriptor, the token in the store, and the
// token handed to the model or to tool processes.
func TestTokenNeverLogged(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	m.Default(fixtures.Reply{Text: "ok"})
	m.On("approve me", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf victim")}}, fixtures.Reply{Text: "removed"})
	m.On("deny me", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("rm -rf victim2")}}, fixtures.Reply{Text: "kept"})
	m.On("show env", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{atkTerm("env")}}, fixtures.Reply{Text: "seen"})
	m.On("ask me", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify", Arguments: `{"question":"Which?","choices":["a","b"]}`}}}, fixtures.Reply{Text: "fine"})
	m.On("fail me", fixtures.Reply{Status: 500, Text: `{"error":{"message":"upstream broke"}}`})
	hold := fixtures.NewGate()
	m.On("hold me", fixtures.Reply{Text: "never", Gate: hold})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{
		Config: fixtures.FakeModelConfig(m, "approvals: {mode: manual, timeout: 60}\nlimits: {max_message_bytes: 65536}"),
		Args:   []string{"--log-level", "debug"},
	})
	a := aaTargetOf(t, d, m)
	tokens := []string{a.tok}

	refusals := func(a *aaTarget) {
		tok, q := a.tok, url.QueryEscape(a.tok)
		for _, hdr := range [][][2]string{
			{aaV1},
			{aaBearer(aaRandomToken(tok)), aaV1},
			{aaBearer(tok[:len(tok)-1]), aaV1},
			{aaBearer(tok + "x"), aaV1},
			{aaProto("sessiond.v1, sessiond.token." + tok + "x")},
			{aaProto("sessiond.v1, sessiond.token." + tok[:32])},
			{{"Authorization", "Basic " + tok}, aaV1},
		} {
			aaUpgrade(t, a, "/rpc", a.addr, hdr...)
		}
		aaUpgrade(t, a, "/rpc?token="+q, a.addr, aaV1)
		aaUpgrade(t, a, "/rpc?token="+q, "evil.example:"+a.port, aaBearer(tok), aaV1)
		aaUpgrade(t, a, "/rpc", a.addr, aaOrigin("http://evil.example/"+tok), aaBearer(tok), aaV1)
		aaUpgrade(t, a, "/nope/"+tok+"?token="+q, a.addr, aaBearer(tok), aaV1)
		aaSend(t, a.addr, aaRequest("POST", "/rpc?token="+q, a.addr, [][2]string{aaBearer(tok), {"Content-Type", "text/plain"}}, `{"token":"`+tok+`"}`))
		aaSend(t, a.addr, "GET /rpc?token="+q+" HTTP/1.1\r\nHost: "+a.addr+"\r\nBroken header line "+tok+"\r\n\r\n")
		aaUpgrade(t, a, "/rpc?a=1;token="+q, a.addr, aaV1) // net/http logs semicolons in queries
		// The right token on upgrades the websocket library rejects (a
		// bad key, a missing Connection header): the refusal is logged at
		// debug.
		aaSend(t, a.addr, "GET /rpc HTTP/1.1\r\nHost: "+a.addr+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\nAuthorization: Bearer "+tok+"\r\n\r\n")
		aaSend(t, a.addr, aaRequest("GET", "/rpc?token="+q, a.addr, [][2]string{aaBearer(tok)}, ""))
	}
	refusals(a)

	c := d.Dial(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "victim"), 0o755)
	os.MkdirAll(filepath.Join(dir, "victim2"), 0o755)
	s := createSession(t, c, map[string]any{"cwd": dir, "title": "token journey"})
	resume(t, c, s.SessionID)
	r := submit(t, c, s.SessionID, "approve", "approve me")
	if _, err := answerApproval(t, c, s.SessionID, waitPrompt(t, c, r.AdmissionID, "approval"), "once"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	r = submit(t, c, s.SessionID, "deny", "deny me")
	if _, err := answerApproval(t, c, s.SessionID, waitPrompt(t, c, r.AdmissionID, "approval"), "deny"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	r = submit(t, c, s.SessionID, "ask", "ask me")
	if _, err := answerClarify(t, c, s.SessionID, waitPrompt(t, c, r.AdmissionID, "clarify"), "b"); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	r = submit(t, c, s.SessionID, "env", "show env")
	waitTurn(t, c, r.AdmissionID)
	r = submit(t, c, s.SessionID, "fail", "fail me")
	if out := waitTurn(t, c, r.AdmissionID); out != "failed" {
		t.Errorf("the turn against a 500 ended %s, want failed", out)
	}
	r = submit(t, c, s.SessionID, "hold", "hold me")
	waitParked(t, hold, "hold me")
	if err := c.Call(ctxT(t), "session.interrupt", map[string]any{"session_id": s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, c, r.AdmissionID)
	atkRawReply(t, c, "not json")
	big := d.Dial(t)
	_ = big.SendText(ctxT(t), aaSubmitFrame(t, 9, s.SessionID, "big", 65537))
	big.WaitClosed(t, wait)
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	// A second run with its own token, refused the same way, stopped.
	d.Restart(t)
	a2 := aaTargetOf(t, d, m)
	tokens = append(tokens, a2.tok)
	refusals(a2)
	atkAlive(t, d.Dial(t))
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("exit code %d after the second SIGTERM", code)
	}

	out := d.AllStderr() + d.Stdout()
	if !strings.Contains(out, "level=DEBUG") {
		t.Fatalf("--log-level debug wrote no debug line, so this test proves nothing; stderr:\n%s", out)
	}
	var scanned []string
	scan := func(root string, skip func(string) bool) {
		filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || skip(path) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("reading %s: %v", path, err)
				return nil
			}
			scanned = append(scanned, strings.TrimPrefix(path, root+"/"))
			for _, tok := range tokens {
				if p := aaLeaks(string(b), tok); p != "" {
					t.Errorf("%s contains %q of a token", path, p)
				}
			}
			return nil
		})
	}
	scan(d.Home, func(p string) bool { return filepath.Base(p) == "daemon.json" })
	scan(d.LogDir, func(string) bool { return false })
	t.Logf("scanned %q", scanned)
	for _, tok := range tokens {
		if p := aaLeaks(out, tok); p != "" {
			t.Errorf("the daemon's output contains %q of a token", p)
		}
		for _, req := range m.Requests() {
			if p := aaLeaks(string(req.Raw)+fmt.Sprint(req.Header), tok); p != "" {
				t.Errorf("the model received %q of a token (last user text %q)", p, req.LastUserText())
			}
		}
	}
	// The env command did run, so its output was checked too.
	if got := toolResults(m, "show env"); len(got) == 0 || !strings.Contains(got[len(got)-1], "PATH=") {
		t.Errorf("the env command's result %q, want the environment", got)
	}
}
