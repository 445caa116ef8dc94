package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
)

// ProtocolVersion is the MCP revision the client asks for: the classic
// initialize handshake, server-initiated elicitation and
// notifications/tools/list_changed, which every current server speaks.
const ProtocolVersion = "2025-11-25"

// Defaults of Options.
const (
	DefaultStartTimeout    = 30 * time.Second
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultMaxBackoff      = 60 * time.Second
	DefaultMaxMessageBytes = 32 << 20
	minBackoff             = time.Second
	// stableAfter: a server ready this long starts its next backoff at
	// the minimum again.
	stableAfter = time.Minute
)

// Options configure a session's Set; durations are wall-clock.
type Options struct {
	// SessionID names the session in logs.
	SessionID string
	// Cwd is the session's cwd: the sandbox's working directory, and a
	// stdio server's unless its entry names another.
	Cwd string
	// Sandbox confines stdio servers (the session's spec: policy, home and
	// protected paths); nil when the session's sandbox is off.
	Sandbox *sandbox.Spec
	// SandboxUnavailable, when not empty, says why Sandbox cannot be
	// enforced here: stdio servers then fail to start (fail closed).
	SandboxUnavailable string
	// Env is the environment every stdio server gets (the terminal's
	// allowlist, tools.AllowedEnv), before its own env.
	Env []string
	// StartTimeout bounds a start: process, initialize and the tool list
	// (DefaultStartTimeout when zero).
	StartTimeout time.Duration
	// IdleTimeout is how long after the last Release the servers keep
	// running (DefaultIdleTimeout when zero; negative: until Stop).
	IdleTimeout time.Duration
	// MaxBackoff caps the wait before a failed server is started again
	// (DefaultMaxBackoff when zero); the first wait is 1 s, doubling.
	MaxBackoff time.Duration
	// MaxMessageBytes bounds one message from a stdio server
	// (DefaultMaxMessageBytes when zero): a longer one fails the server.
	MaxMessageBytes int
	// OnStatus, when not nil, hears every status change (the daemon sends
	// mcp.status). Called from the server's goroutine, never under a lock.
	OnStatus func(protocol.MCPServerStatus)
	// Logger receives start failures and restarts; nil discards them.
	Logger *slog.Logger
	// HTTPClient reaches streamable HTTP servers; nil: http.DefaultClient.
	HTTPClient *http.Client
	// Version is the client version sent in initialize.
	Version string
}

// Tool is one tool of a ready server as the model sees it.
type Tool struct {
	Server      string
	Name        string // as the server names it
	FullName    string // mcp__<server>__<tool>
	Description string
	// InputSchema is the server's JSON Schema of the arguments.
	InputSchema json.RawMessage
	// AutoApproved: the server's config entry lists the tool in
	// auto_approve.
	AutoApproved bool
}

// ErrUnavailable is wrapped by Call's error when the server is not ready
// (starting, failed, stopped) or does not offer the tool: nothing was sent.
var ErrUnavailable = errors.New("mcp: tool unavailable")

// ErrNotSent is wrapped by Call's error when BeforeSend failed: nothing
// was sent.
var ErrNotSent = errors.New("mcp: call not sent")

// Set is the MCP servers of one session.
type Set struct {
	opt     Options
	servers []*server

	lifecycle sync.Mutex // held by reconcile

	mu      sync.Mutex
	users   int
	running bool
	stopped bool // Stop was called: never starts again
	idle    *time.Timer
	changed chan struct{} // closed and replaced at every status change
}

// NewSet makes the set of list; nothing starts before Acquire.
func NewSet(list []Server, opt Options) *Set {
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = DefaultStartTimeout
	}
	if opt.IdleTimeout == 0 {
		opt.IdleTimeout = DefaultIdleTimeout
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = DefaultMaxBackoff
	}
	if opt.MaxMessageBytes <= 0 {
		opt.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{opt: opt, changed: make(chan struct{})}
	for _, cfg := range list {
		s.servers = append(s.servers, &server{set: s, cfg: cfg, status: protocol.MCPStopped})
	}
	return s
}

// Empty reports whether the set has no server.
func (s *Set) Empty() bool { return len(s.servers) == 0 }

// Servers returns the frozen list.
func (s *Set) Servers() []Server {
	out := make([]Server, len(s.servers))
	for i, sv := range s.servers {
		out[i] = sv.cfg
	}
	return out
}

// Acquire marks the set in use (a turn runs) and starts every server not
// running (Wait waits for their first start); Release undoes one Acquire.
func (s *Set) Acquire() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.users++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.running = true
	s.mu.Unlock()
	s.reconcile()
}

// Release ends one Acquire; when none is left the servers stop after
// Options.IdleTimeout unless acquired again.
func (s *Set) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users > 0 {
		s.users--
	}
	if s.users > 0 || !s.running || s.stopped || s.opt.IdleTimeout < 0 {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(s.opt.IdleTimeout, func() {
		s.mu.Lock()
		if s.idle != t || s.users > 0 {
			s.mu.Unlock()
			return
		}
		s.idle = nil
		s.running = false
		s.mu.Unlock()
		s.reconcile()
	})
	s.idle = t
}

// Stop stops every server (graceful stop, session deletion) and waits for
// them; the set never starts again.
func (s *Set) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.running = false
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.mu.Unlock()
	s.reconcile()
}

// reconcile brings the servers to the state the set wants now (running,
// or stopped), one reconcile at a time: whatever the order in which an
// idle stop, an Acquire and a Stop ran, the last state asked for wins, and
// a server is never started while its previous run is being stopped.
func (s *Set) reconcile() {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.mu.Lock()
	want := s.running && !s.stopped
	s.mu.Unlock()
	if want {
		for _, sv := range s.servers {
			sv.start()
		}
		return
	}
	var wg sync.WaitGroup
	for _, sv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sv.stop()
		}()
	}
	wg.Wait()
}

// broadcast wakes Wait.
func (s *Set) broadcast() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Wait returns once no server is in its first start since Acquire (each
// is ready, failed or stopped), or when ctx ends. A restart after a
// failure is not waited for: a server that keeps failing (hanging in
// initialize, say) delays no turn but the first.
func (s *Set) Wait(ctx context.Context) {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		starting := false
		for _, sv := range s.servers {
			sv.mu.Lock()
			starting = starting || (sv.status == protocol.MCPStarting && sv.first)
			sv.mu.Unlock()
		}
		if !starting {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Status returns every server's state, in the list's order.
func (s *Set) Status() []protocol.MCPServerStatus {
	out := make([]protocol.MCPServerStatus, 0, len(s.servers))
	for _, sv := range s.servers {
		out = append(out, sv.snapshot())
	}
	return out
}

// Tools returns the tools of every ready server, in the list's order
// then the server's.
func (s *Set) Tools() []Tool {
	var out []Tool
	for _, sv := range s.servers {
		sv.mu.Lock()
		if sv.status == protocol.MCPReady {
			out = append(out, sv.tools...)
		}
		sv.mu.Unlock()
	}
	return out
}

// Tool returns the tool of server named tool when that server is ready.
func (s *Set) Tool(server, tool string) (Tool, bool) {
	for _, t := range s.Tools() {
		if t.Server == server && t.Name == tool {
			return t, true
		}
	}
	return Tool{}, false
}

// Server returns the configuration of the server named name.
func (s *Set) Server(name string) (Server, bool) {
	for _, sv := range s.servers {
		if sv.cfg.Name == name {
			return sv.cfg, true
		}
	}
	return Server{}, false
}

// Notes are what the model is told about servers whose tools are
// withdrawn (not ready), one sentence each; nil when all are ready.
func (s *Set) Notes() []string {
	var out []string
	for _, st := range s.Status() {
		switch st.Status {
		case protocol.MCPReady:
		case protocol.MCPFailed:
			out = append(out, fmt.Sprintf("MCP server %q is unavailable (%s); its tools (mcp__%s__*) are withdrawn until it is restarted.", st.Name, st.Error, st.Name))
		default:
			out = append(out, fmt.Sprintf("MCP server %q is %s; its tools (mcp__%s__*) are not available now.", st.Name, st.Status, st.Name))
		}
	}
	return out
}

// ElicitFunc answers an elicitation (form mode) of a server during a call:
// message and the requested schema (a flat object of primitive
// properties) in; the MCP result out ({action: accept|decline|cancel,
// content}).
type ElicitFunc func(ctx context.Context, message string, schema json.RawMessage) (*sdk.ElicitResult, error)

// CallOptions are the hooks of one call.
type CallOptions struct {
	// BeforeSend runs right before tools/call is sent; an error sends
	// nothing (Call returns it wrapped in ErrNotSent).
	BeforeSend func() error
	// Elicit answers the server's elicitations during the call; nil
	// declines them.
	Elicit ElicitFunc
	// Timeout bounds the call (none when zero).
	Timeout time.Duration
}

// Call calls tool of server with args (a JSON object). Errors: wrapping
// ErrUnavailable (nothing sent: the server is not ready or has no such
// tool), ErrNotSent (BeforeSend failed), ctx's error (cancelled: the SDK
// sent notifications/cancelled), or the failure of a sent call (the server
// died or answered with an error; the call's effects are unknown).
func (s *Set) Call(ctx context.Context, name, tool string, args json.RawMessage, opt CallOptions) (*sdk.CallToolResult, error) {
	var sv *server
	for _, x := range s.servers {
		if x.cfg.Name == name {
			sv = x
		}
	}
	if sv == nil {
		return nil, fmt.Errorf("%w: no MCP server %q in this session", ErrUnavailable, name)
	}
	sv.mu.Lock()
	cs, proc, st, errText := sv.cs, sv.proc, sv.status, sv.err
	found := false
	for _, t := range sv.tools {
		found = found || t.Name == tool
	}
	sv.mu.Unlock()
	if st != protocol.MCPReady || cs == nil {
		if errText != "" {
			return nil, fmt.Errorf("%w: MCP server %q is %s (%s)", ErrUnavailable, name, st, errText)
		}
		return nil, fmt.Errorf("%w: MCP server %q is %s", ErrUnavailable, name, st)
	}
	if !found {
		return nil, fmt.Errorf("%w: MCP server %q has no tool %q", ErrUnavailable, name, tool)
	}
	sv.callMu.Lock() // one call at a time per server: elicitations go to it
	defer sv.callMu.Unlock()
	if opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.Timeout)
		defer cancel()
	}
	sv.mu.Lock()
	sv.elicit = opt.Elicit
	sv.mu.Unlock()
	defer func() {
		sv.mu.Lock()
		sv.elicit = nil
		sv.mu.Unlock()
	}()
	if opt.BeforeSend != nil {
		if err := opt.BeforeSend(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			// The server answered with an error: it lives.
			return nil, fmt.Errorf("MCP server %q answered with an error: %s", name, shortErr(err))
		}
		if proc != nil {
			if reason := waitExitError(proc); reason != "" {
				return nil, fmt.Errorf("MCP server %q failed during the call: %s (%s)", name, shortErr(err), reason)
			}
		}
		return nil, fmt.Errorf("MCP server %q: %w", name, err)
	}
	return res, nil
}

// server is one server's state and its run loop.
type server struct {
	set *Set
	cfg Server

	callMu sync.Mutex // held by Call while its request is out

	mu      sync.Mutex
	status  protocol.MCPStatus
	err     string
	tools   []Tool
	cs      *sdk.ClientSession
	proc    *process
	elicit  ElicitFunc
	first   bool               // in its first start since the run loop began
	cancel  context.CancelFunc // ends the run loop
	done    chan struct{}      // closed when the run loop returned
	relists chan struct{}      // tools/list_changed, coalesced
}

func (sv *server) snapshot() protocol.MCPServerStatus {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.statusLocked()
}

func (sv *server) statusLocked() protocol.MCPServerStatus {
	names := []string{}
	if sv.status == protocol.MCPReady {
		for _, t := range sv.tools {
			names = append(names, t.Name)
		}
	}
	return protocol.MCPServerStatus{Name: sv.cfg.Name, Status: sv.status, Error: sv.err, Tools: names,
		Transport: sv.cfg.Transport(), Source: sv.cfg.Source}
}

// setStatus records a change and tells OnStatus and Wait.
// Any status but ready forgets the client session: Call never uses the
// session of a server that is not ready. A change to the status already
// held (a failure reported when the session ended, then by the run loop)
// is not reported again.
func (sv *server) setStatus(st protocol.MCPStatus, errText string, tools []Tool) {
	sv.mu.Lock()
	if st != protocol.MCPReady && sv.status == st && sv.err == errText {
		sv.mu.Unlock()
		return
	}
	if st != protocol.MCPStarting {
		sv.first = false
	}
	sv.status, sv.err = st, errText
	if st == protocol.MCPReady {
		sv.tools = tools
	} else {
		sv.tools = nil
		sv.cs, sv.proc = nil, nil
	}
	snap := sv.statusLocked()
	sv.mu.Unlock()
	if f := sv.set.opt.OnStatus; f != nil {
		f(snap)
	}
	sv.set.broadcast()
}

// start begins the run loop unless it runs (reconcile's lock is held).
func (sv *server) start() {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.done != nil {
		select {
		case <-sv.done:
		default:
			return // running
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv.cancel, sv.done, sv.relists = cancel, make(chan struct{}), make(chan struct{}, 1)
	sv.status, sv.first = protocol.MCPStarting, true
	go sv.run(ctx, sv.done)
}

// stop ends the run loop and waits for it (status stopped; reconcile's
// lock is held).
func (sv *server) stop() {
	sv.mu.Lock()
	cancel, done := sv.cancel, sv.done
	sv.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// run starts the server, serves it while it lives, and starts it again
// after a backoff when it fails, until ctx ends.
func (sv *server) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	backoff := minBackoff
	lastErr := ""
	for {
		sv.setStatus(protocol.MCPStarting, lastErr, nil)
		readyAt, err := sv.serveOnce(ctx)
		if ctx.Err() != nil {
			sv.setStatus(protocol.MCPStopped, "", nil)
			return
		}
		lastErr = err.Error()
		if !readyAt.IsZero() && time.Since(readyAt) >= stableAfter {
			backoff = minBackoff
		}
		sv.set.opt.Logger.Warn("MCP server failed; restarting after a backoff", "session_id", sv.set.opt.SessionID,
			"server", sv.cfg.Name, "err", lastErr, "backoff", backoff)
		sv.setStatus(protocol.MCPFailed, lastErr, nil)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			sv.setStatus(protocol.MCPStopped, "", nil)
			return
		case <-t.C:
		}
		backoff = min(backoff*2, sv.set.opt.MaxBackoff)
	}
}

// serveOnce starts the server, lists its tools, marks it ready and waits
// until it ends (its error) or ctx ends. readyAt is when it became ready
// (zero if it never did).
func (sv *server) serveOnce(ctx context.Context) (readyAt time.Time, err error) {
	opt := &sv.set.opt
	client := sdk.NewClient(&sdk.Implementation{Name: "sessiond", Version: opt.Version}, &sdk.ClientOptions{
		Capabilities:       &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}},
		ElicitationHandler: sv.handleElicit,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case sv.relists <- struct{}{}:
			default:
			}
		},
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
	})
	// No sampling handler: the client does not offer sampling, and the SDK
	// answers a server's sampling/createMessage with the MCP error -32601
	// (method not found). The session's model is not lent to servers.

	var transport sdk.Transport
	var proc *process
	if sv.cfg.URL != "" {
		hc := opt.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		if len(sv.cfg.Headers) > 0 {
			c := *hc
			c.Transport = headerTransport{base: hc.Transport, headers: sv.cfg.Headers}
			hc = &c
		}
		transport = &sdk.StreamableClientTransport{Endpoint: sv.cfg.URL, HTTPClient: hc, MaxRetries: -1}
	} else {
		p, err := startProcess(sv.cfg, opt)
		if err != nil {
			return time.Time{}, err
		}
		proc = p
		defer proc.stop()
		transport = &sdk.IOTransport{Reader: proc.stdout, Writer: proc.stdin, MaxLineLength: opt.MaxMessageBytes}
	}

	// The start (initialize and the tool list) is bounded: past the
	// deadline the process is killed (its pipes close, the SDK returns)
	// and an HTTP start is cancelled.
	startCtx, cancelStart := context.WithTimeout(ctx, opt.StartTimeout)
	defer cancelStart()
	stopWatch := context.AfterFunc(startCtx, func() {
		if proc != nil {
			proc.kill()
		}
	})
	cs, err := client.Connect(startCtx, transport, &sdk.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err == nil {
		defer cs.Close()
	}
	var tools []Tool
	if err == nil {
		tools, err = sv.listTools(startCtx, cs)
	}
	if !stopWatch() && ctx.Err() == nil {
		// The deadline fired: whatever the SDK said, it was the timeout.
		err = fmt.Errorf("did not finish initialize and tools/list within %s", opt.StartTimeout)
	}
	if err != nil {
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		if proc != nil {
			if e := waitExitError(proc); e != "" {
				return time.Time{}, fmt.Errorf("%s (%v)", e, shortErr(err))
			}
		}
		return time.Time{}, fmt.Errorf("start: %v", shortErr(err))
	}
	sv.mu.Lock()
	sv.cs, sv.proc = cs, proc
	sv.mu.Unlock()
	readyAt = time.Now()
	sv.setStatus(protocol.MCPReady, "", tools)
	// Leaving, the server is marked failed (stopped) at once, before its
	// session is closed and its process stopped: ready always means a
	// session that Call may use.
	defer func() {
		if ctx.Err() != nil {
			sv.setStatus(protocol.MCPStopped, "", nil)
		} else if err != nil {
			sv.setStatus(protocol.MCPFailed, err.Error(), nil)
		}
	}()

	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return readyAt, ctx.Err()
		case werr := <-ended:
			if proc != nil {
				if e := waitExitError(proc); e != "" {
					return readyAt, errors.New(e)
				}
			}
			if werr == nil {
				werr = io.EOF
			}
			return readyAt, fmt.Errorf("the MCP connection ended: %v", shortErr(werr))
		case <-sv.relists:
			lctx, cancel := context.WithTimeout(ctx, opt.StartTimeout)
			tools, err := sv.listTools(lctx, cs)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return readyAt, ctx.Err()
				}
				return readyAt, fmt.Errorf("tools/list after notifications/tools/list_changed: %v", shortErr(err))
			}
			sv.setStatus(protocol.MCPReady, "", tools)
		}
	}
}

// waitExitError gives a process that is going away a moment to be reaped,
// so that its exit status explains the failure.
func waitExitError(p *process) string {
	t := time.NewTimer(500 * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
	return p.exitError()
}

// toolName is what a tool's name must be to reach the model: the
// function names of Chat Completions, within 64 characters in all.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// listTools reads the server's tools (every page) and keeps those whose
// name fits a model-facing tool name, sorted by name.
func (sv *server) listTools(ctx context.Context, cs *sdk.ClientSession) ([]Tool, error) {
	var out []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		full := protocol.MCPToolName(sv.cfg.Name, t.Name)
		srv, tl, ok := protocol.SplitMCPToolName(full)
		if !toolName.MatchString(t.Name) || len(full) > 64 || !ok || srv != sv.cfg.Name || tl != t.Name {
			// (a server name of a session stored before names ending
			// in "_" were refused: its tool would name another's.)
			sv.set.opt.Logger.Warn("MCP tool left out: its name cannot be a model tool name", "server", sv.cfg.Name, "tool", protocol.Visible(t.Name))
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, Tool{Server: sv.cfg.Name, Name: t.Name, FullName: full, Description: t.Description,
			InputSchema: schema, AutoApproved: sv.cfg.AutoApproved(t.Name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// handleElicit routes an elicitation to the call in flight; none, or a
// URL-mode request: declined.
func (sv *server) handleElicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	sv.mu.Lock()
	f := sv.elicit
	sv.mu.Unlock()
	if f == nil || (req.Params.Mode != "" && req.Params.Mode != "form") {
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	schema, err := json.Marshal(req.Params.RequestedSchema)
	if err != nil {
		schema = json.RawMessage(`{}`)
	}
	return f(ctx, req.Params.Message, schema)
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// shortErr bounds an error's text (an SDK error can quote a whole frame).
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
