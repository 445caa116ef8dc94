package journeys

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/fixtures"
)

// TestFoundationLifecycle is the journey of issue 2: start, create/resume/
// list, SIGTERM, restart, SIGKILL, restart over the stale lock and
// descriptor, and a second daemon refused.
func TestFoundationLifecycle(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "")})

	// The descriptor is private, the home too.
	st, err := os.Stat(fixtures.DescriptorPath(d.Home))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("descriptor mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	if st, _ := os.Stat(d.Home); st.Mode().Perm() != 0o700 {
		t.Fatalf("home mode = %v, want 0700", st.Mode().Perm())
	}
	if d.Desc.Protocol != 1 || !strings.HasPrefix(d.Desc.URL, "ws://127.0.0.1:") || len(d.Desc.Token) < 32 {
		t.Fatalf("descriptor = %+v", d.Desc)
	}

	c := d.Dial(t)
	var init struct {
		Protocol  int   `json:"protocol"`
		BootEpoch int64 `json:"boot_epoch"`
	}
	if err := c.Call(ctxT(t), "initialize", map[string]any{"client": map[string]string{"name": "journey", "version": "1"}}, &init); err != nil {
		t.Fatal(err)
	}
	if init.Protocol != 1 || init.BootEpoch != d.Desc.BootEpoch {
		t.Fatalf("initialize = %+v, descriptor epoch %d", init, d.Desc.BootEpoch)
	}
	cwd := t.TempDir()
	s1 := createSession(t, c, map[string]any{"cwd": cwd, "title": "first", "request_id": "create-1", "source": "journey"})
	if s1.Cwd != cwd || s1.Model != fixtures.FakeModelName || s1.BaseURL != m.URL() || len(s1.Toolsets) != 2 {
		t.Fatalf("snapshot = %+v", s1)
	}
	if s1.Messages == nil || s1.Prompts == nil || s1.Pending == nil {
		t.Fatalf("snapshot lists must be present (empty), got %+v", s1)
	}
	// Idempotent by request_id; other params with the same id conflict.
	again := createSession(t, c, map[string]any{"cwd": cwd, "title": "first", "request_id": "create-1", "source": "journey"})
	if again.SessionID != s1.SessionID {
		t.Fatalf("same request_id created %s and %s", s1.SessionID, again.SessionID)
	}
	err = c.Call(ctxT(t), "session.create", map[string]any{"cwd": cwd, "title": "other", "request_id": "create-1"}, nil)
	wantReason(t, err, -32000, "admission_conflict")
	s2 := createSession(t, c, map[string]any{"title": "second"})
	if got := resume(t, c, s1.SessionID); got.Title != "first" || got.SessionID != s1.SessionID {
		t.Fatalf("resume = %+v", got)
	}
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
		} `json:"sessions"`
		NextCursor string `json:"next_cursor"`
	}
	if err := c.Call(ctxT(t), "session.list", map[string]any{"limit": 1}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != s2.SessionID || list.NextCursor == "" {
		t.Fatalf("first page = %+v", list)
	}
	cursor := list.NextCursor
	list.NextCursor = ""
	if err := c.Call(ctxT(t), "session.list", map[string]any{"limit": 1, "cursor": cursor}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != s1.SessionID {
		t.Fatalf("second page = %+v", list)
	}
	if list.NextCursor != "" {
		t.Fatalf("the last page has a next_cursor: %+v", list)
	}

	// SIGTERM: exit 0, the connection closes with 1001, the descriptor is gone.
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d\n%s", code, d.Stderr())
	}
	if got := c.WaitClosed(t, wait); got != websocket.StatusGoingAway {
		t.Fatalf("close status = %v, want 1001 (err %v)", got, c.Err())
	}
	if _, err := os.Stat(fixtures.DescriptorPath(d.Home)); !os.IsNotExist(err) {
		t.Fatalf("descriptor after SIGTERM: %v", err)
	}

	// Restart on the same home: the session is still there, the epoch moved.
	oldEpoch := d.Desc.BootEpoch
	d.Restart(t)
	if d.Desc.BootEpoch <= oldEpoch {
		t.Fatalf("boot_epoch %d after %d", d.Desc.BootEpoch, oldEpoch)
	}
	c = d.Dial(t)
	if got := resume(t, c, s1.SessionID); got.Cwd != cwd {
		t.Fatalf("after restart: %+v", got)
	}

	// SIGKILL leaves the lock file and the descriptor; the next start takes
	// them over.
	d.SIGKILL(t)
	if _, err := os.Stat(fixtures.DescriptorPath(d.Home)); err != nil {
		t.Fatalf("a killed daemon should leave its descriptor behind: %v", err)
	}
	stalePID := d.Desc.PID
	d.Restart(t)
	if d.Desc.PID == stalePID {
		t.Fatal("descriptor still names the killed daemon")
	}
	c = d.Dial(t)
	resume(t, c, s2.SessionID)

	// A second daemon on the same home is refused and says why.
	code, stderr := fixtures.StartDaemonExpectFailure(t, fixtures.DaemonOptions{Home: d.Home})
	if code == 0 || !strings.Contains(stderr, "locked") {
		t.Fatalf("second daemon: exit %d, stderr %q", code, stderr)
	}
	// The first one is unaffected.
	resume(t, c, s1.SessionID)
}

// TestBadInputGetsClearErrors covers the bad-input list of issue 2.
func TestBadInputGetsClearErrors(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "limits: {max_message_bytes: 65536}")})
	c := d.Dial(t)
	ctx := ctxT(t)

	t.Run("malformed JSON is -32700 and the connection stays usable", func(t *testing.T) {
		if err := c.SendText(ctx, `{"jsonrpc":"2.0","id":1,"method":`); err != nil {
			t.Fatal(err)
		}
		raw, err := c.ReadRawResponse(ctx)
		if err != nil || !strings.Contains(string(raw), "-32700") {
			t.Fatalf("response %s, %v", raw, err)
		}
		var info map[string]any
		if err := c.Call(ctx, "daemon.info", nil, &info); err != nil {
			t.Fatalf("connection unusable after a parse error: %v", err)
		}
	})
	t.Run("non-object params are invalid_params", func(t *testing.T) {
		_, rerr, err := c.CallRaw(ctx, "session.resume", []string{"x"})
		if err != nil || rerr == nil || rerr.Code != -32602 || rerr.Reason() != "invalid_params" {
			t.Fatalf("rpc error %+v, %v", rerr, err)
		}
	})
	t.Run("wrong param type names the field", func(t *testing.T) {
		_, rerr, err := c.CallRaw(ctx, "session.create", map[string]any{"cwd": 42})
		if err != nil || rerr == nil || rerr.Reason() != "invalid_params" || !strings.Contains(rerr.Message, "cwd") {
			t.Fatalf("rpc error %+v, %v", rerr, err)
		}
	})
	t.Run("unknown method is -32601", func(t *testing.T) {
		err := c.Call(ctx, "session.explode", nil, nil)
		wantReason(t, err, -32601, "method_not_found")
	})
	t.Run("relative cwd is invalid_params", func(t *testing.T) {
		err := c.Call(ctx, "session.create", map[string]any{"cwd": "relative/dir"}, nil)
		wantReason(t, err, -32602, "invalid_params")
	})
	t.Run("missing cwd directory is invalid_params", func(t *testing.T) {
		err := c.Call(ctx, "session.create", map[string]any{"cwd": filepath.Join(t.TempDir(), "nope")}, nil)
		wantReason(t, err, -32602, "invalid_params")
	})
	t.Run("unknown session is not_found", func(t *testing.T) {
		err := c.Call(ctx, "session.resume", map[string]any{"session_id": "ses_nope"}, nil)
		wantReason(t, err, -32000, "not_found")
	})
	t.Run("missing and wrong tokens get 401", func(t *testing.T) {
		for name, hdr := range map[string]http.Header{
			"none":   nil,
			"wrong":  fixtures.BearerHeader("0000"),
			"prefix": fixtures.BearerHeader(d.Desc.Token[:len(d.Desc.Token)-1]),
		} {
			_, resp, err := fixtures.DialRaw(ctx, d.Desc.URL, &websocket.DialOptions{HTTPHeader: hdr, Subprotocols: []string{fixtures.Subprotocol}})
			if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s token: resp %v, err %v", name, resp, err)
			}
		}
		// The subprotocol form works.
		conn, _, err := fixtures.DialRaw(ctx, d.Desc.URL, &websocket.DialOptions{Subprotocols: fixtures.TokenSubprotocols(d.Desc.Token)})
		if err != nil {
			t.Fatalf("subprotocol token refused: %v", err)
		}
		if conn.Subprotocol() != fixtures.Subprotocol {
			t.Fatalf("selected subprotocol %q", conn.Subprotocol())
		}
		conn.CloseNow()
	})
	t.Run("foreign Origin gets 403", func(t *testing.T) {
		h := fixtures.BearerHeader(d.Desc.Token)
		h.Set("Origin", "https://attacker.example")
		_, resp, err := fixtures.DialRaw(ctx, d.Desc.URL, &websocket.DialOptions{HTTPHeader: h})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("resp %v, err %v", resp, err)
		}
	})
	t.Run("non-loopback Host is refused", func(t *testing.T) {
		h := fixtures.BearerHeader(d.Desc.Token)
		port := d.Desc.URL[strings.LastIndex(d.Desc.URL, ":")+1 : strings.LastIndex(d.Desc.URL, "/")]
		h.Set("Host", "evil.example:"+port)
		_, resp, err := fixtures.DialRaw(ctx, d.Desc.URL, &websocket.DialOptions{HTTPHeader: h, Host: "evil.example:" + port})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("resp %v, err %v", resp, err)
		}
	})
	t.Run("a frame over the limit closes with 1009 and loses nothing", func(t *testing.T) {
		big := d.Dial(t)
		s := createSession(t, big, map[string]any{})
		r := submit(t, big, s.SessionID, "before-big", "hello")
		payload := `{"jsonrpc":"2.0","id":99,"method":"daemon.info","params":{"pad":"` + strings.Repeat("x", 70000) + `"}}`
		big.SendText(ctx, payload)
		if got := big.WaitClosed(t, wait); got != websocket.StatusMessageTooBig {
			t.Fatalf("close status %v, want 1009", got)
		}
		fresh := d.Dial(t)
		snap := resume(t, fresh, s.SessionID)
		found := false
		for _, p := range snap.Pending {
			found = found || p.AdmissionID == r.AdmissionID
		}
		for _, msg := range snap.Messages {
			found = found || msg.AdmissionID == r.AdmissionID
		}
		if !found {
			t.Fatalf("admission %s lost after the oversized frame: %+v", r.AdmissionID, snap)
		}
	})
}

func TestConfigWrongTypeNamesTheKey(t *testing.T) {
	code, stderr := fixtures.StartDaemonExpectFailure(t, fixtures.DaemonOptions{
		Config: "limits:\n  max_concurrent_turns: lots\nmystery_key: 1\n",
	})
	if code == 0 || !strings.Contains(stderr, "limits.max_concurrent_turns") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestUnknownConfigKeysAreWarnedAndIgnored(t *testing.T) {
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: "mystery_key: 1\nlimits: {other: 2}\n"})
	fixtures.Eventually(t, wait, "warnings in stderr", func() bool {
		s := d.Stderr()
		return strings.Contains(s, "mystery_key") && strings.Contains(s, "limits.other")
	})
}
