package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// descriptorFile is HOME/daemon.json (PROTOCOL.md section 1).
const descriptorFile = protocol.DescriptorFile

// descriptor is HOME/daemon.json.
type descriptor = protocol.Descriptor

// resolveHome picks the home like the daemon does (protocol.ResolveHome).
func resolveHome(flag string) (string, error) {
	home, err := protocol.ResolveHome(flag)
	if err != nil {
		return "", fail(exitUsage, "%v", err)
	}
	return home, nil
}

// homeOrigin says where resolveHome(flag) took the home from, for
// messages.
func homeOrigin(flag string) string { return protocol.HomeOrigin(flag) }

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readDescriptor reads HOME/daemon.json, explaining a missing daemon;
// origin says where the home came from (homeOrigin).
func readDescriptor(home, origin string) (descriptor, error) {
	var d descriptor
	path := filepath.Join(home, descriptorFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		q := shellQuote(home)
		return d, fail(exitUnreachable, "no daemon running for home %s (%s): it has no %s. Start one there with `sessiond --home %s` (in the repository: `SESSIOND_HOME=%s make run`), or point sessionctl at the running daemon's home with --home or SESSIOND_HOME (plain `make run` serves the repository's .home)",
			home, origin, descriptorFile, q, q)
	}
	if err != nil {
		return d, fail(exitUnreachable, "cannot read %s: %v", path, err)
	}
	if err := json.Unmarshal(b, &d); err != nil || d.URL == "" {
		if err == nil {
			err = errors.New(`no "url"`)
		}
		return d, fail(exitUnreachable, "%s is not a daemon descriptor (%v); restart the daemon to rewrite it", path, err)
	}
	if d.Protocol != 0 && d.Protocol != protocol.Version {
		return d, fail(exitUnreachable, "the daemon for home %s speaks protocol %d; this sessionctl speaks %d", home, d.Protocol, protocol.Version)
	}
	return d, nil
}

// connect reads the descriptor (fresh every time: a restarted daemon has a
// new port and token) and opens an authenticated connection. Every error is
// an *exitError with code 3 and one explaining line.
func (a *app) connect(ctx context.Context, opt rpc.DialOptions) (*rpc.Client, descriptor, error) {
	home, err := resolveHome(a.home)
	if err != nil {
		return nil, descriptor{}, err
	}
	d, err := readDescriptor(home, homeOrigin(a.home))
	if err != nil {
		return nil, d, err
	}
	dctx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	opt.Token = d.Token
	// Everything sessionctl receives may be printed: strings a model or a
	// client controls show their escape sequences instead of running them.
	opt.VisibleStrings = true
	c, err := rpc.Dial(dctx, d.URL, opt)
	if err != nil {
		if ctx.Err() != nil {
			return nil, d, ctx.Err()
		}
		return nil, d, explainDial(err, home, d, a.connectTimeout)
	}
	// Name this client, so that the daemon's audit log and the transcript
	// say who answered a prompt or deleted a session.
	var init protocol.InitializeResult
	if err := c.Call(dctx, protocol.MethodInitialize, protocol.InitializeParams{Client: protocol.ClientInfo{Name: "sessionctl", Version: version}}, &init); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, d, ctx.Err()
		}
		if c.Err() != nil {
			return nil, d, fail(exitUnreachable, "lost the daemon during initialize: %s", describeClosed(c.Err()))
		}
		return nil, d, err
	}
	return c, d, nil
}

func explainDial(err error, home string, d descriptor, timeout time.Duration) error {
	var de *rpc.DialError
	if !errors.As(err, &de) {
		return fail(exitUnreachable, "cannot connect to the daemon at %s: %v", d.URL, err)
	}
	switch de.StatusCode {
	case 0:
	case http.StatusUnauthorized:
		return fail(exitUnreachable, "the daemon at %s refused the token from %s (HTTP 401); the descriptor does not match the running daemon — restart it", d.URL, filepath.Join(home, descriptorFile))
	case http.StatusForbidden:
		return fail(exitUnreachable, "the daemon at %s refused this connection (HTTP 403: host or origin not allowed)", d.URL)
	case http.StatusServiceUnavailable:
		return fail(exitUnreachable, "the daemon at %s is stopping (HTTP 503); retry once it has restarted", d.URL)
	default:
		return fail(exitUnreachable, "the daemon at %s refused the connection (HTTP %d %s)", d.URL, de.StatusCode, http.StatusText(de.StatusCode))
	}
	if d.PID > 0 && !processAlive(d.PID) {
		return fail(exitUnreachable, "no daemon running for home %s: daemon.json names pid %d, which is gone (it was killed); start the daemon again", home, d.PID)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fail(exitUnreachable, "cannot reach the daemon at %s (pid %d, home %s): connection refused; start the daemon again", d.URL, d.PID, home)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fail(exitUnreachable, "the daemon at %s (pid %d) did not answer within %v", d.URL, d.PID, timeout)
	}
	return fail(exitUnreachable, "cannot reach the daemon at %s (pid %d, home %s): %v", d.URL, d.PID, home, errors.Unwrap(err))
}

// processAlive reports whether pid exists (signal 0). EPERM means it
// exists but belongs to someone else.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// describeClosed explains a lost connection in one line.
func describeClosed(err error) string {
	if err == nil {
		return "connection closed"
	}
	var ce *rpc.ClosedError
	if errors.As(err, &ce) {
		switch ce.Status {
		case 1001:
			return "the daemon is stopping (1001)"
		case 1008:
			return "the connection fell behind and was closed (1008)"
		case 1009:
			return "a message was too big (1009)"
		}
		if ce.Status >= 0 {
			return fmt.Sprintf("the daemon closed the connection (%d %s)", int(ce.Status), ce.Reason)
		}
		if ce.Err != nil {
			// "failed to get reader: failed to read frame header: EOF" -> "EOF"
			msg := ce.Err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			return "the connection to the daemon broke (" + msg + ")"
		}
	}
	return fmt.Sprint(err)
}
