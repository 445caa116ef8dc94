package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// maxToolOutput bounds the output of one tool call the bridge keeps to show
// in the editor (the tail is kept).
const maxToolOutput = 64 << 10

func (a *app) acpCommand() *cobra.Command {
	var reconnectFor time.Duration
	cmd := &cobra.Command{
		Use:   "acp",
		Short: "Serve the Agent Client Protocol on stdin/stdout for editors (Zed, JetBrains, Neovim, …)",
		Long: `Runs an Agent Client Protocol (ACP) agent on stdin/stdout that drives the
daemon of the home (--home, $SESSIOND_HOME, …): an editor spawns
` + "`sessionctl acp`" + ` and talks JSON-RPC on its stdio. stdout carries only ACP
frames; logs go to stderr.

The daemon must already run on the home: initialize fails with the command
that starts it otherwise (the bridge never starts a daemon itself, so the
durable daemon does not live and die with an editor).

Editor sessions are sessiond sessions: session/new creates one in the
editor's cwd, session/load replays a stored one, session/prompt submits one
input with an idempotency key the bridge keeps until the turn settles. If the
daemon restarts or the connection drops, the bridge reconnects (re-reading
daemon.json), resumes after the last event it saw and resubmits with the same
key, so a prompt runs exactly once. Approvals become permission requests
(allow once, allow for this session, reject); clarifications with choices
become permission requests whose options are the choices; free-text ones a
form (elicitation) when the editor offers it, else an agent message with the
` + "`sessionctl answer`" + ` command. A prompt the daemon lost in a crash fails with
the ` + "`sessionctl resolve`" + ` command to run; the next prompt on that session asks
the editor whether to discard the lost turn. A prompt sent while the daemon
is down waits for it up to --reconnect-timeout. session/list, resume, close
and delete work on the daemon's sessions; the mode, model and sandbox
options are stored in the session (session.update). See README "Editors"
and docs/protocol.md, "H. The ACP bridge".`,
		Example: `  # Zed settings.json (Zed before v0.208: drop "type")
  "agent_servers": {
    "sessiond": { "type": "custom", "command": "/usr/local/bin/sessionctl", "args": ["acp"],
                  "env": { "SESSIOND_HOME": "/home/me/.sessiond" } }
  }

  # any other ACP client: run this command on the client's stdio
  sessionctl --home /home/me/.sessiond acp`,
		Args: args(0, "no arguments"),
	}
	cmd.Flags().DurationVar(&reconnectFor, "reconnect-timeout", 5*time.Minute, "how long a prompt keeps reconnecting to a lost daemon before it fails")
	cmd.RunE = a.verb(false, func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		b := newBridge(a, log, reconnectFor)
		// The SDK logs through slog.Default (its SetLogger races with the
		// reader it has already started), so the default goes to stderr too.
		slog.SetDefault(log)
		f := newFrames(b, a.stdout)
		conn := acp.NewAgentSideConnection(b, f.out, f.filter(a.stdin))
		b.setConn(conn)
		select {
		case <-conn.Done():
		case <-ctx.Done():
		}
		// Every request in flight is answered before the bridge exits: its
		// prompts stop following their turns (which go on in the daemon)
		// and say so.
		b.stop()
		dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if n := f.drain(dctx); n > 0 {
			log.Warn("exiting with requests unanswered", "count", n)
		}
		return nil
	})
	return cmd
}

// bridge is the ACP agent: one per `sessionctl acp` process.
type bridge struct {
	app          *app
	conn         *acp.AgentSideConnection // set once, before ready closes
	ready        chan struct{}
	log          *slog.Logger
	reconnectFor time.Duration

	ctx    context.Context // ends when the bridge stops
	cancel context.CancelFunc

	mu            sync.Mutex
	clientCaps    acp.ClientCapabilities       // from initialize
	turns         map[string]map[*acpTurn]bool // session id -> prompts in flight
	notes         map[string][]string          // session id -> notes for its first prompt
	byRequest     map[string]*acpTurn          // the editor's request id (frames' key) -> its prompt
	cancelledReqs map[string]bool              // $/cancel_request of prompts not registered yet
}

var (
	_ acp.Agent       = (*bridge)(nil)
	_ acp.AgentLoader = (*bridge)(nil)

	_ acp.ExtensionMethodHandler = (*bridge)(nil)
)

func newBridge(a *app, log *slog.Logger, reconnectFor time.Duration) *bridge {
	ctx, cancel := context.WithCancel(context.Background())
	return &bridge{app: a, log: log, reconnectFor: reconnectFor, ctx: ctx, cancel: cancel, ready: make(chan struct{}),
		turns: map[string]map[*acpTurn]bool{}, notes: map[string][]string{},
		byRequest: map[string]*acpTurn{}, cancelledReqs: map[string]bool{}}
}

func (b *bridge) stop() { b.cancel() }

// stopping says the bridge is exiting (the editor closed stdin or a
// signal came).
func (b *bridge) stopping() bool { return b.ctx.Err() != nil }

// setConn hands the bridge its connection; the SDK's reader may deliver a
// request before NewAgentSideConnection returns, so handlers wait for it.
func (b *bridge) setConn(c *acp.AgentSideConnection) {
	b.conn = c
	close(b.ready)
}

// client is the editor's connection (see setConn).
func (b *bridge) client() *acp.AgentSideConnection {
	<-b.ready
	return b.conn
}

// daemonErr turns an error of a daemon call into the ACP error sent back:
// a daemon refusal keeps its code and reason; no daemon or a lost one gives
// -32000 with the explaining line (how to start it).
func daemonErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return acp.NewRequestCancelled(map[string]any{"reason": "cancelled", "error": "the request was cancelled ($/cancel_request) or the editor closed the connection"})
	}
	var re *protocol.Error
	if errors.As(err, &re) {
		return refusal(re)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return &acp.RequestError{Code: protocol.CodeRefused, Message: ee.msg, Data: map[string]any{"reason": "daemon_unreachable"}}
	}
	return &acp.RequestError{Code: protocol.CodeRefused, Message: err.Error(), Data: map[string]any{"reason": "daemon_unreachable"}}
}

// call runs one daemon request on a fresh connection.
func (b *bridge) call(ctx context.Context, method string, params, result any) error {
	return b.app.call(ctx, method, params, result)
}

// Initialize negotiates the protocol (ACP version 1 is the one spoken) and
// checks the daemon is there: without one it fails with how to start it.
func (b *bridge) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	var info protocol.DaemonInfo
	if err := b.call(ctx, protocol.MethodDaemonInfo, nil, &info); err != nil {
		return acp.InitializeResponse{}, daemonErr(err)
	}
	b.mu.Lock()
	b.clientCaps = p.ClientCapabilities
	b.mu.Unlock()
	title := "sessiond"
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{EmbeddedContext: true},
			SessionCapabilities: acp.SessionCapabilities{
				List: &acp.SessionListCapabilities{}, Resume: &acp.SessionResumeCapabilities{}, Close: &acp.SessionCloseCapabilities{},
				// session/delete (ACP 1.0) has no type in acp-go-sdk v0.13.0.
				Meta: map[string]any{"delete": map[string]any{}},
			},
		},
		AgentInfo: &acp.Implementation{Name: "sessiond", Title: &title, Version: info.Version,
			Meta: map[string]any{"sessionctl": version, "home": info.Home, "boot_epoch": info.BootEpoch}},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

// Authenticate is not needed: the bridge authenticates to the daemon with
// the home's descriptor token and advertises no auth method, so every
// methodId is refused as invalid params.
func (b *bridge) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, acp.NewInvalidParams(map[string]any{"reason": "invalid_params", "methodId": p.MethodId,
		"error": fmt.Sprintf("unknown auth method %q: sessiond advertises none (the bridge authenticates to the daemon with the home's daemon.json token)", p.MethodId)})
}

// mcpNotConnected is the note for the editor's MCP servers sessiond does
// not take: it connects stdio servers only (it does not advertise http or
// sse, PROTOCOL.md 10.5).
const mcpNotConnected = "sessiond connects the editor's stdio MCP servers only: %s not connected to this session."

// NewSession creates a daemon session in the editor's cwd with the
// editor's stdio MCP servers as the session's own (session.create
// mcp_servers, PROTOCOL.md 10.5); names are made [A-Za-z0-9_-]{1,32}.
func (b *bridge) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	servers, skipped := acpMCPServers(p.McpServers)
	var snap protocol.Snapshot
	if err := b.call(ctx, protocol.MethodSessionCreate, protocol.SessionCreateParams{Cwd: p.Cwd, Source: "ide", MCPServers: servers}, &snap); err != nil {
		return acp.NewSessionResponse{}, daemonErr(err)
	}
	resp := acp.NewSessionResponse{SessionId: acp.SessionId(snap.SessionID)}
	if st, err := b.state(ctx, snap.SessionID); err == nil {
		resp.ConfigOptions, resp.Modes = st.configOptions(), st.modeState()
	}
	if len(p.McpServers) > 0 {
		names := []string{}
		for _, s := range servers {
			names = append(names, s.Name)
		}
		meta := map[string]any{"mcpServers": names}
		if len(skipped) > 0 {
			note := fmt.Sprintf(mcpNotConnected, strings.Join(skipped, ", "))
			meta["note"] = note
			b.mu.Lock()
			b.notes[snap.SessionID] = append(b.notes[snap.SessionID], note)
			b.mu.Unlock()
			b.log.Warn("MCP servers not connected: only stdio servers are", "session", snap.SessionID, "skipped", skipped)
		}
		resp.Meta = map[string]any{"sessiond": meta}
	}
	return resp, nil
}

// acpMCPServers maps an editor's MCP servers to session.create's: stdio
// ones with their command, args and env, names made [A-Za-z0-9_-]{1,32}
// without "__" and unique; the others (http, sse, acp) are skipped, by
// name.
func acpMCPServers(list []acp.McpServer) (out []protocol.MCPServerParams, skipped []string) {
	used := map[string]bool{}
	for _, s := range list {
		if s.Stdio == nil {
			name := "?"
			switch {
			case s.Http != nil:
				name = s.Http.Name + " (http)"
			case s.Sse != nil:
				name = s.Sse.Name + " (sse)"
			case s.Acp != nil:
				name = "acp"
			}
			skipped = append(skipped, protocol.Visible(name))
			continue
		}
		name := mcpName(s.Stdio.Name)
		for i := 2; used[name]; i++ {
			suffix := fmt.Sprintf("-%d", i)
			name = mcpName(s.Stdio.Name)
			name = name[:min(len(name), 32-len(suffix))] + suffix
		}
		used[name] = true
		var env map[string]string
		for _, e := range s.Stdio.Env {
			if env == nil {
				env = map[string]string{}
			}
			env[e.Name] = e.Value
		}
		out = append(out, protocol.MCPServerParams{Name: name, Command: s.Stdio.Command, Args: s.Stdio.Args, Env: env})
	}
	return out, skipped
}

// mcpName makes an editor's server name a sessiond one: characters other
// than [A-Za-z0-9_-] become "_", "__" becomes "_", at most 32 characters;
// "mcp" when nothing is left.
func mcpName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := b.String()
	for strings.Contains(n, "__") {
		n = strings.ReplaceAll(n, "__", "_")
	}
	n = strings.Trim(n, "_")
	if len(n) > 32 {
		n = strings.TrimRight(n[:32], "_")
	}
	if n == "" {
		n = "mcp"
	}
	return n
}

// LoadSession resumes a daemon session and replays its stored history as
// session/update notifications before answering.
func (b *bridge) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	var snap protocol.Snapshot
	if err := b.call(ctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: string(p.SessionId)}, &snap); err != nil {
		return acp.LoadSessionResponse{}, daemonErr(err)
	}
	for _, u := range replayUpdates(snap.Messages) {
		if err := b.client().SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	resp := acp.LoadSessionResponse{Meta: mcpMeta(len(p.McpServers), snap)}
	if st, err := b.state(ctx, string(p.SessionId)); err == nil {
		resp.ConfigOptions, resp.Modes = st.configOptions(), st.modeState()
	}
	return resp, nil
}

// Cancel stops the session's prompts in flight: a queued one is withdrawn
// (prompt.cancel), a running one interrupted (session.interrupt with its
// generation). With none known to this bridge, the session's running turn
// is interrupted.
func (b *bridge) Cancel(ctx context.Context, p acp.CancelNotification) error {
	b.mu.Lock()
	var ts []*acpTurn
	for t := range b.turns[string(p.SessionId)] {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	if len(ts) == 0 {
		cctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		defer cancel()
		if err := b.call(cctx, protocol.MethodInterrupt, protocol.InterruptParams{SessionID: string(p.SessionId)}, nil); err != nil {
			b.log.Warn("session/cancel: interrupt failed", "session", p.SessionId, "err", err)
		}
		return nil
	}
	for _, t := range ts {
		t.requestCancel()
	}
	return nil
}

// Prompt submits the prompt and follows its turn until it settles.
func (b *bridge) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	// The SDK cancels a prompt's context when the same session gets
	// another prompt; the daemon queues both, so the bridge's own context
	// governs, and session/cancel is handled by Cancel.
	text, err := promptText(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"reason": "invalid_params", "error": err.Error()})
	}
	inputID := ""
	if p.MessageId != nil && validInputID("acp-"+*p.MessageId) {
		inputID = "acp-" + *p.MessageId // the editor's retry of one message stays one input
	} else {
		inputID = newInputID("acp")
	}
	t := &acpTurn{b: b, sessionID: string(p.SessionId), inputID: inputID, text: text, lastSeq: -1,
		cancelCh: make(chan struct{}, 1), perms: map[string]context.CancelFunc{}, tools: map[string]*acpTool{}}
	reqKey, _ := p.Meta[requestIDMeta].(string) // set by the frame filter
	b.mu.Lock()
	if b.turns[t.sessionID] == nil {
		b.turns[t.sessionID] = map[*acpTurn]bool{}
	}
	b.turns[t.sessionID][t] = true
	notes := b.notes[t.sessionID]
	delete(b.notes, t.sessionID)
	cancelledEarly := false
	if reqKey != "" {
		b.byRequest[reqKey] = t
		cancelledEarly = b.cancelledReqs[reqKey]
		delete(b.cancelledReqs, reqKey)
	}
	b.mu.Unlock()
	if cancelledEarly {
		t.cancelByRequest()
	}
	defer func() {
		b.mu.Lock()
		delete(b.turns[t.sessionID], t)
		if len(b.turns[t.sessionID]) == 0 {
			delete(b.turns, t.sessionID)
		}
		if reqKey != "" {
			delete(b.byRequest, reqKey)
		}
		b.mu.Unlock()
		t.withdrawPermissions()
	}()
	for _, n := range notes {
		t.say(n + "\n\n")
	}
	stop, rerr := t.run()
	if rerr != nil && b.stopping() {
		return acp.PromptResponse{}, &acp.RequestError{Code: protocol.CodeRefused, Data: map[string]any{"reason": "bridge_stopped", "input_id": t.inputID},
			Message: fmt.Sprintf("sessionctl acp is exiting (the editor closed its stdin): it stops following this prompt; if the daemon admitted it (input id %s), it runs there — session/load shows its result", t.inputID)}
	}
	if rerr != nil {
		return acp.PromptResponse{}, rerr
	}
	b.mu.Lock()
	byRequest := t.byRequest
	b.mu.Unlock()
	if byRequest && stop == acp.StopReasonCancelled {
		return acp.PromptResponse{}, acp.NewRequestCancelled(map[string]any{"reason": "cancelled", "input_id": t.inputID, "outcome": t.outcome})
	}
	resp := acp.PromptResponse{StopReason: stop}
	if t.declined != nil {
		resp.Meta = map[string]any{"sessiond": t.declined}
	}
	if p.MessageId != nil {
		resp.UserMessageId = p.MessageId
	}
	return resp, nil
}

// acpTurn is one session/prompt: its input, what the bridge knows of its
// admission, and the editor's open permission requests.
type acpTurn struct {
	b         *bridge
	sessionID string
	inputID   string
	text      string

	admissionID string
	status      string // receipt status: queued | started | terminal | unknown
	outcome     string
	errText     string
	generation  *int64
	lastSeq     int64
	warnedHeld  bool
	failureSaid bool

	cancelCh        chan struct{}
	cancelRequested bool
	byRequest       bool           // cancelled by $/cancel_request of its request (answers -32800)
	declined        map[string]any // set when the editor kept a crash's unknown turn: why the prompt was not sent

	pmu   sync.Mutex
	perms map[string]context.CancelFunc // prompt id -> withdraws its permission request
	tools map[string]*acpTool
}

type acpTool struct {
	name   string
	output string
}

// cancelByRequest is requestCancel for $/cancel_request.
func (t *acpTurn) cancelByRequest() {
	t.b.mu.Lock()
	t.byRequest = true
	t.b.mu.Unlock()
	t.requestCancel()
}

func (t *acpTurn) requestCancel() {
	select {
	case t.cancelCh <- struct{}{}:
	default:
	}
}

// update sends one session/update for the turn's session.
func (t *acpTurn) update(u acp.SessionUpdate) {
	if err := t.b.client().SessionUpdate(t.b.ctx, acp.SessionNotification{SessionId: acp.SessionId(t.sessionID), Update: u}); err != nil {
		t.b.log.Debug("session/update not sent", "err", err)
	}
}

func (t *acpTurn) say(text string) { t.update(acp.UpdateAgentMessageText(text)) }

func (t *acpTurn) settled() bool {
	return t.status == string(protocol.StatusTerminal) || t.status == string(protocol.StatusUnknown)
}

// run follows the turn over as many connections as it takes and returns
// the stop reason or the request's error.
func (t *acpTurn) run() (acp.StopReason, error) {
	ctx := t.b.ctx
	lostAt := time.Now()
	backoff := 100 * time.Millisecond
	waitSaid := false
	for attempt := 0; ; attempt++ {
		c, _, err := t.b.app.connect(ctx, rpc.DialOptions{})
		if err == nil {
			if attempt > 0 {
				t.b.log.Info("reconnected to the daemon; resuming", "session", t.sessionID, "input_id", t.inputID, "after_seq", t.lastSeq)
			}
			err = t.follow(ctx, c)
			c.Close()
			t.withdrawPermissions() // open ones are asked again from the next snapshot
			if err == nil {
				return t.finish()
			}
			if errors.Is(err, errDeclined) {
				if t.cancelRequested { // session/cancel while the editor was asked
					return acp.StopReasonCancelled, nil
				}
				return acp.StopReasonRefusal, nil
			}
			if !errors.Is(err, errLost) {
				return "", err
			}
			t.b.log.Warn("lost the daemon; reconnecting", "session", t.sessionID, "why", describeClosed(c.Err()))
			lostAt, backoff = time.Now(), 100*time.Millisecond
		} else {
			// The daemon is down or restarting (also before this prompt
			// was sent): wait for it up to --reconnect-timeout.
			if ctx.Err() != nil {
				return "", daemonErr(err)
			}
			if time.Since(lostAt) > t.b.reconnectFor {
				what := "the daemon was not reachable"
				if attempt > 0 && t.admissionID != "" {
					what = "lost the daemon"
				}
				kept := "nothing was sent"
				if t.admissionID != "" {
					kept = fmt.Sprintf("the input, id %s, is kept in the daemon and runs once it is back", t.inputID)
				}
				return "", &acp.RequestError{Code: protocol.CodeRefused, Data: map[string]any{"reason": "daemon_unreachable", "input_id": t.inputID, "admitted": t.admissionID != ""},
					Message: fmt.Sprintf("%s and could not reconnect within %v (--reconnect-timeout): %s; %s", what, t.b.reconnectFor, oneLine(err.Error()), kept)}
			}
			if !waitSaid {
				waitSaid = true
				t.b.log.Warn("the daemon is not reachable; waiting for it", "session", t.sessionID, "input_id", t.inputID, "for", t.b.reconnectFor, "err", oneLine(err.Error()))
				t.say(fmt.Sprintf("_The daemon is not reachable (%s); waiting up to %v for it to come back._\n\n", oneLine(err.Error()), t.b.reconnectFor))
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.cancelCh:
			if t.admissionID == "" {
				return acp.StopReasonCancelled, nil // nothing was admitted: nothing to withdraw
			}
			t.cancelRequested = true // withdrawn or interrupted once the daemon is back
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// sayFailure ends a failed turn's stream with the daemon's reason, once.
func (t *acpTurn) sayFailure() {
	if t.outcome != string(protocol.OutcomeFailed) || t.failureSaid {
		return
	}
	t.failureSaid = true
	msg := t.errText
	if msg == "" {
		msg = "the turn failed"
	}
	t.say("\n\n**Turn failed:** " + msg + "\n")
}

// finish maps the settled admission to the response.
func (t *acpTurn) finish() (acp.StopReason, error) {
	t.sayFailure() // the receipt may have settled before turn.completed came
	stop, rerr := stopFor(t.status, t.outcome, t.errText, t.b.app.cmdline("resolve", t.sessionID, t.admissionID))
	if rerr != nil {
		return "", rerr
	}
	return stop, nil
}

// follow does one connection's work: subscribe after the last seen event,
// submit (again) with the same input id, then apply events until the
// admission settles. nil: settled; errLost: the connection ended first;
// anything else is the request's error.
func (t *acpTurn) follow(ctx context.Context, c *rpc.Client) error {
	lost := func(err error) error {
		if errors.Is(err, rpc.ErrClosed) || c.Err() != nil {
			return errLost
		}
		return err
	}
	rp := protocol.ResumeParams{SessionID: t.sessionID}
	if t.lastSeq >= 0 {
		rp.AfterSeq = &t.lastSeq
	}
	var snap protocol.Snapshot
	if err := c.Call(ctx, protocol.MethodSessionResume, rp, &snap); err != nil {
		if err = lost(err); err == errLost {
			return err
		}
		return daemonErr(err)
	}
	if t.status != string(protocol.StatusStarted) {
		if err := t.discardUnknown(ctx, c, snap); err != nil {
			return err
		}
	}
	var r protocol.Receipt
	for {
		err := c.Call(ctx, protocol.MethodPromptSubmit, protocol.SubmitParams{SessionID: t.sessionID, InputID: t.inputID, Text: t.text}, &r)
		switch {
		case errors.Is(err, protocol.ErrOverloaded):
			select {
			case <-time.After(200 * time.Millisecond):
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		case errors.Is(err, protocol.ErrDraining):
			select { // the daemon stops: reconnect to its successor
			case <-c.Done():
				return errLost
			case <-ctx.Done():
				return ctx.Err()
			}
		case err != nil:
			if err = lost(err); err == errLost {
				return err
			}
			return refusal(err)
		}
		break
	}
	// The missed events first, then the receipt: it is newer than all of
	// them (an older "started" must not overwrite "unknown").
	t.admissionID = r.AdmissionID
	if t.lastSeq >= 0 && !snap.SnapshotRequired {
		for _, ev := range snap.Events {
			t.applySeq(ev)
		}
	}
	t.setReceipt(r)
	if snap.LastSeq > t.lastSeq {
		t.lastSeq = snap.LastSeq
	}
	if t.settled() {
		return nil
	}
	t.noteHeld(r)
	for _, p := range snap.Prompts {
		if p.AdmissionID == t.admissionID {
			t.openPrompt(p)
		}
	}
	cancelled := false
	if t.cancelRequested { // session/cancel came while the daemon was away
		cancelled = true
		t.cancelOn(ctx, c)
	}
	for {
		select {
		case n, ok := <-c.Notifications():
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return errLost
			}
			if n.Method != protocol.NotifySessionEvent {
				continue
			}
			var ev protocol.Event
			if json.Unmarshal(n.Params, &ev) != nil || ev.SessionID != t.sessionID {
				continue
			}
			t.applySeq(ev)
			if t.settled() {
				return nil
			}
		case <-t.cancelCh:
			t.cancelRequested = true
			if !cancelled {
				cancelled = true
				t.cancelOn(ctx, c)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cancelOn withdraws the admission when queued, or interrupts its turn.
// When the admission started meanwhile (not_queued) or its generation is
// not known yet, the session's snapshot says whether it runs and under
// which generation.
func (t *acpTurn) cancelOn(ctx context.Context, c *rpc.Client) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if t.status == string(protocol.StatusQueued) {
		var r protocol.Receipt
		err := c.Call(cctx, protocol.MethodPromptCancel, protocol.AdmissionRef{SessionID: t.sessionID, AdmissionID: t.admissionID}, &r)
		if err == nil {
			t.setReceipt(r)
			return
		}
		if !errors.Is(err, protocol.ErrNotQueued) {
			t.b.log.Warn("session/cancel: prompt.cancel failed", "admission", t.admissionID, "err", err)
			return
		}
	}
	gen := t.generation
	if t.status != string(protocol.StatusStarted) || gen == nil {
		// On a connection of its own: a second subscription on c would
		// deliver this session's deltas twice.
		var snap protocol.Snapshot
		if err := t.b.call(cctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: t.sessionID, AfterSeq: &t.lastSeq}, &snap); err != nil {
			t.b.log.Warn("session/cancel: reading the session failed", "admission", t.admissionID, "err", err)
			return
		}
		if snap.Running == nil || *snap.Running != t.admissionID {
			return // settled already, or not ours: nothing to stop
		}
		g := snap.ExecutionGeneration
		gen = &g
	}
	if err := c.Call(cctx, protocol.MethodInterrupt, protocol.InterruptParams{SessionID: t.sessionID, ExecutionGeneration: gen}, nil); err != nil {
		t.b.log.Warn("session/cancel: session.interrupt failed", "admission", t.admissionID, "err", err)
	}
}

// noteHeld tells the editor once that the input waits behind an unknown
// admission, and what unblocks it.
func (t *acpTurn) noteHeld(r protocol.Receipt) {
	if r.AdmissionID != t.admissionID || r.Status != protocol.StatusQueued || r.Reason != protocol.WaitUnknown || t.warnedHeld {
		return
	}
	t.warnedHeld = true
	t.say(fmt.Sprintf("This prompt is queued behind a turn the daemon lost in a crash (its outcome is unknown). It runs once an operator decides on that turn: `%s` lists it, `%s` settles it.\n\n",
		t.b.app.cmdline("pending", t.sessionID), t.b.app.cmdline("resolve", t.sessionID, "ADMISSION")))
}

func (t *acpTurn) setReceipt(r protocol.Receipt) {
	if r.AdmissionID != t.admissionID || t.status == string(protocol.StatusTerminal) {
		return
	}
	t.status = string(r.Status)
	if r.Outcome != nil {
		t.outcome = string(*r.Outcome)
	}
	if r.Error != "" {
		t.errText = r.Error
	}
	if r.ExecutionGeneration != nil {
		g := *r.ExecutionGeneration
		t.generation = &g
	}
}

// applySeq applies one event unless its seq was seen already.
func (t *acpTurn) applySeq(ev protocol.Event) {
	if ev.Seq != nil {
		if *ev.Seq <= t.lastSeq {
			return
		}
		t.lastSeq = *ev.Seq
	}
	t.apply(ev)
}

// apply maps one daemon event of the turn's admission to the editor.
// Events that do not decode, and event types this build does not know,
// are skipped.
func (t *acpTurn) apply(ev protocol.Event) {
	pl, err := ev.Decode()
	if err != nil {
		return
	}
	if r, ok := pl.(protocol.Receipt); ok {
		t.setReceipt(r)
		t.noteHeld(r)
		return
	}
	if ev.AdmissionID != t.admissionID || t.admissionID == "" {
		return
	}
	switch p := pl.(type) {
	case protocol.TurnStartedPayload:
		t.status = string(protocol.StatusStarted)
		if ev.ExecutionGeneration != nil {
			g := *ev.ExecutionGeneration
			t.generation = &g
		}
	case protocol.MessageDeltaPayload:
		if p.Text != "" {
			t.say(p.Text)
		}
	case protocol.ToolStartedPayload:
		t.tools[p.ToolCallID] = &acpTool{name: p.Name}
		t.update(acp.StartToolCall(acp.ToolCallId(p.ToolCallID), toolTitle(p.Name, p.Args),
			acp.WithStartKind(toolKind(p.Name)), acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(rawArgs(p.Args))))
	case protocol.ToolOutputPayload:
		tl := t.tools[p.ToolCallID]
		if tl == nil {
			tl = &acpTool{}
			t.tools[p.ToolCallID] = tl
		}
		tl.output += p.Text
		if len(tl.output) > maxToolOutput {
			tl.output = tl.output[len(tl.output)-maxToolOutput:]
		}
		t.update(acp.UpdateToolCall(acp.ToolCallId(p.ToolCallID), acp.WithUpdateStatus(acp.ToolCallStatusInProgress),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(tl.output))})))
	case protocol.ToolCompletedPayload:
		res := string(p.Result)
		var s string
		if json.Unmarshal(p.Result, &s) == nil {
			res = s
		}
		ok := p.OK
		text, failed := toolResult(p.Name, res, &ok)
		t.update(acp.UpdateToolCall(acp.ToolCallId(p.ToolCallID), acp.WithUpdateStatus(toolStatus(failed)),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}),
			acp.WithUpdateRawOutput(rawArgs(json.RawMessage(res)))))
	case protocol.PromptOpenedPayload:
		t.openPrompt(p.Prompt)
	case protocol.PromptClosedPayload:
		t.withdraw(p.PromptID)
	case protocol.TurnCompletedPayload:
		t.status, t.outcome, t.errText = string(protocol.StatusTerminal), string(p.Outcome), p.Error
		t.sayFailure()
	}
}

// openPrompt asks the editor about one approval or clarification of the
// turn, once per prompt id and connection.
func (t *acpTurn) openPrompt(p protocol.Prompt) {
	t.pmu.Lock()
	if _, open := t.perms[p.PromptID]; open {
		t.pmu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(t.b.ctx)
	t.perms[p.PromptID] = cancel
	t.pmu.Unlock()
	switch p.Kind {
	case protocol.KindApproval:
		go t.askApproval(ctx, p)
	case protocol.KindClarify:
		cp := clarifyOf(p)
		opts, ok := clarifyOptions(cp)
		t.b.mu.Lock()
		elicit := t.b.clientCaps.Elicitation != nil && t.b.clientCaps.Elicitation.Form != nil
		t.b.mu.Unlock()
		if !ok && elicit && len(cp.Questions) > 0 {
			go t.askElicitation(ctx, p, cp)
			return
		}
		if !ok {
			t.say(fmt.Sprintf("\n\n**The agent asks:** %s\n\nThis editor cannot take a free-text answer to a tool's question; answer it from a terminal with `%s` (the question waits until it times out).\n\n",
				promptSummary(p), t.b.app.cmdline("answer", t.sessionID, p.PromptID, "'YOUR ANSWER'")))
			return
		}
		go t.askClarify(ctx, p, cp, opts)
	}
}

func (t *acpTurn) askApproval(ctx context.Context, p protocol.Prompt) {
	ap := approvalOf(p)
	title := ap.Command
	question := fmt.Sprintf("Run `%s`? %s", ap.Command, ap.Reason)
	if ap.SandboxPermissions == escalated {
		title = "UNSANDBOXED: " + ap.Command
		question = fmt.Sprintf("Run `%s` OUTSIDE the sandbox, this once? The agent says: %s", ap.Command, ap.Justification)
	}
	raw := map[string]any{"command": ap.Command, "cwd": ap.Cwd, "risk": ap.Risk, "reason": ap.Reason, "pattern": ap.Pattern}
	resp, err := t.b.client().RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: acp.SessionId(t.sessionID),
		ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(ap.ToolCallID), Title: &title, Kind: acp.Ptr(acp.ToolKindExecute),
			Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: raw,
			Content: []acp.ToolCallContent{acp.ToolContent(acp.TextBlock(question))}},
		Options: approvalOptions(ap.offered()),
		Meta:    map[string]any{"sessiond": map[string]any{"prompt_id": p.PromptID, "execution_generation": p.ExecutionGeneration}},
	})
	if ctx.Err() != nil {
		return // withdrawn by the bridge: the daemon closed the prompt or the connection changed
	}
	if err != nil {
		t.b.log.Warn("session/request_permission failed; the approval stays open", "prompt", p.PromptID, "err", err)
		return
	}
	choice := approvalChoice(resp.Outcome)
	t.respond(p, protocol.RespondParams{Choice: protocol.Choice(choice)})
}

func (t *acpTurn) askClarify(ctx context.Context, p protocol.Prompt, cp clarifyPayload, opts []acp.PermissionOption) {
	q := cp.Questions[0].Question
	resp, err := t.b.client().RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: acp.SessionId(t.sessionID),
		ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(cp.ToolCallID), Title: &q, Kind: acp.Ptr(acp.ToolKindThink),
			Status: acp.Ptr(acp.ToolCallStatusPending)},
		Options: opts,
		Meta:    map[string]any{"sessiond": map[string]any{"prompt_id": p.PromptID, "kind": "clarify"}},
	})
	if ctx.Err() != nil || err != nil {
		return
	}
	answer, ok := clarifyChoice(cp, resp.Outcome)
	if !ok {
		t.say(fmt.Sprintf("\n\nThe question stays unanswered (it times out), or answer it with `%s`.\n\n",
			t.b.app.cmdline("answer", t.sessionID, p.PromptID, "'YOUR ANSWER'")))
		return
	}
	b, _ := json.Marshal(answer)
	t.respond(p, protocol.RespondParams{Answer: b})
}

// askElicitation asks a clarification the permission card cannot carry
// (free text, several questions, multi-select) as a form elicitation, for
// editors that advertise elicitation.form.
func (t *acpTurn) askElicitation(ctx context.Context, p protocol.Prompt, cp clarifyPayload) {
	resp, err := t.b.client().UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{Form: &acp.UnstableCreateElicitationForm{
		Mode: "form", Message: promptSummary(p), RequestedSchema: elicitationSchema(cp),
		Meta: map[string]any{"sessiond": map[string]any{"session_id": t.sessionID, "tool_call_id": cp.ToolCallID, "prompt_id": p.PromptID, "kind": "clarify"}},
	}})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		t.b.log.Warn("elicitation/create failed; the question stays open", "prompt", p.PromptID, "err", err)
		t.say(fmt.Sprintf("\n\n**The agent asks:** %s\n\nAnswer it from a terminal with `%s`.\n\n", promptSummary(p),
			t.b.app.cmdline("answer", t.sessionID, p.PromptID, "'YOUR ANSWER'")))
		return
	}
	if resp.Accept == nil {
		t.say(fmt.Sprintf("\n\nThe question stays unanswered (it times out), or answer it with `%s`.\n\n",
			t.b.app.cmdline("answer", t.sessionID, p.PromptID, "'YOUR ANSWER'")))
		return
	}
	answer, ok := elicitationAnswer(cp, resp.Accept.Content)
	if !ok {
		t.say("\n\nThe form came back without an answer to every question; the question stays open.\n\n")
		return
	}
	b, _ := json.Marshal(answer)
	t.respond(p, protocol.RespondParams{Answer: b})
}

// respond sends the editor's answer for the prompt's own generation.
func (t *acpTurn) respond(p protocol.Prompt, rp protocol.RespondParams) {
	rp.SessionID, rp.PromptID = t.sessionID, p.PromptID
	g := p.ExecutionGeneration
	rp.ExecutionGeneration = &g
	method := protocol.MethodApprovalRespond
	if p.Kind == protocol.KindClarify {
		method = protocol.MethodClarifyRespond
	}
	ctx, cancel := context.WithTimeout(t.b.ctx, 30*time.Second)
	defer cancel()
	if err := t.b.call(ctx, method, rp, nil); err != nil {
		t.b.log.Warn("answer not taken", "method", method, "prompt", p.PromptID, "err", err)
		if errors.Is(err, protocol.ErrStaleGeneration) {
			t.say("\n\n(That answer came too late: the turn that asked is over.)\n\n")
		}
	}
}

// withdraw ends the editor's permission request for one prompt.
func (t *acpTurn) withdraw(promptID string) {
	t.pmu.Lock()
	cancel := t.perms[promptID]
	t.pmu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// withdrawPermissions ends every permission request of the turn; a prompt
// still open is asked again from the next connection's snapshot.
func (t *acpTurn) withdrawPermissions() {
	t.pmu.Lock()
	for id, cancel := range t.perms {
		cancel()
		delete(t.perms, id)
	}
	t.pmu.Unlock()
}

// scopeWriter passes the SDK's frames to w, one Write per frame. It adds the
// session scope (sessionId, toolCallId) that the ACP schema requires on
// elicitation/create and that acp-go-sdk v0.13.0's request type cannot
// carry, taking it from the request's _meta.sessiond.
type scopeWriter struct{ w io.Writer }

func (s *scopeWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"method":"elicitation/create"`)) {
		if out, ok := addElicitationScope(b); ok {
			if _, err := s.w.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return s.w.Write(b)
}

// addElicitationScope rewrites one elicitation/create frame (a JSON line)
// with params.sessionId and params.toolCallId from params._meta.sessiond.
func addElicitationScope(frame []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return nil, false
	}
	var params map[string]any
	if json.Unmarshal(m["params"], &params) != nil {
		return nil, false
	}
	meta, _ := params["_meta"].(map[string]any)
	sd, _ := meta["sessiond"].(map[string]any)
	sid, _ := sd["session_id"].(string)
	if sid == "" {
		return nil, false
	}
	params["sessionId"] = sid
	if tc, _ := sd["tool_call_id"].(string); tc != "" {
		params["toolCallId"] = tc
	}
	pb, err := json.Marshal(params)
	if err != nil {
		return nil, false
	}
	m["params"] = pb
	out, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	return append(out, '\n'), true
}

// errDeclined ends a prompt whose editor chose to keep a crash's unknown
// turn: nothing of the prompt is sent (or its queued input is withdrawn).
var errDeclined = errors.New("the editor kept the unknown turn")

// Permission option ids of the unknown-turn question.
const (
	optDiscard = "discard_unknown"
	optKeep    = "keep_unknown"
)

// discardUnknown handles a session held by an unknown admission (a turn
// the daemon lost in a crash; not this prompt's own): the editor is asked
// whether to discard it. Allow: prompt.resolve_unknown with its generation
// (already resolved by someone else is fine) and the prompt goes on.
// Reject or cancel: the prompt's own queued input, if admitted, is
// withdrawn and errDeclined ends the prompt (stop reason refusal).
func (t *acpTurn) discardUnknown(ctx context.Context, c *rpc.Client, snap protocol.Snapshot) error {
	var u *protocol.Receipt
	for i := range snap.Pending {
		if p := snap.Pending[i]; p.Status == protocol.StatusUnknown && p.AdmissionID != t.admissionID && p.ExecutionGeneration != nil {
			u = &snap.Pending[i]
			break
		}
	}
	if u == nil {
		return nil
	}
	resolveCmd := t.b.app.cmdline("resolve", t.sessionID, u.AdmissionID)
	allow, err := t.askDiscard(ctx, c, *u)
	if err != nil {
		return err
	}
	if !allow {
		if t.admissionID != "" && t.status == string(protocol.StatusQueued) {
			var r protocol.Receipt
			if err := c.Call(ctx, protocol.MethodPromptCancel, protocol.AdmissionRef{SessionID: t.sessionID, AdmissionID: t.admissionID}, &r); err == nil {
				t.setReceipt(r)
			} else if c.Err() != nil {
				return errLost
			} else {
				t.b.log.Warn("withdrawing the held input failed", "admission", t.admissionID, "err", err)
			}
		}
		t.declined = map[string]any{"reason": string(protocol.ReasonUnknownExecution), "admission_id": u.AdmissionID, "resolve": resolveCmd}
		t.say(fmt.Sprintf("\n\n**Not sent:** the session's last turn was lost in a crash and you kept it, so the session's queue stays held (nothing runs after it). Settle it later with `%s`, or send a prompt again and discard it.\n", resolveCmd))
		return errDeclined
	}
	var r protocol.Receipt
	err = c.Call(ctx, protocol.MethodResolveUnknown, protocol.ResolveUnknownParams{SessionID: t.sessionID, AdmissionID: u.AdmissionID,
		ExecutionGeneration: u.ExecutionGeneration}, &r)
	switch {
	case err == nil, errors.Is(err, protocol.ErrStaleGeneration): // stale: settled meanwhile by someone else
	case c.Err() != nil:
		return errLost
	default:
		return daemonErr(err)
	}
	t.say("_The turn lost in the crash was discarded (it never runs again); this prompt goes on._\n\n")
	return nil
}

// askDiscard asks the editor "discard the lost turn and continue?"; the
// question is withdrawn when the daemon connection ends (errLost) or the
// editor cancels the prompt (a reject).
func (t *acpTurn) askDiscard(ctx context.Context, c *rpc.Client, u protocol.Receipt) (bool, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	what := "a turn"
	if u.Text != "" {
		what = fmt.Sprintf("the turn %q", ellipsize(u.Text, 120))
	}
	title := "The last turn was lost in a crash: discard it and continue?"
	body := fmt.Sprintf("The daemon stopped while %s ran, so whether its commands took effect is unknown; it holds the session's queue. Discard it (it is never run again) and send this prompt, or keep it and send nothing?", what)
	type answer struct {
		resp acp.RequestPermissionResponse
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		resp, err := t.b.client().RequestPermission(pctx, acp.RequestPermissionRequest{
			SessionId: acp.SessionId(t.sessionID),
			ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId("unknown-" + u.AdmissionID), Title: &title, Kind: acp.Ptr(acp.ToolKindOther),
				Status:  acp.Ptr(acp.ToolCallStatusPending),
				Content: []acp.ToolCallContent{acp.ToolContent(acp.TextBlock(body))}},
			Options: []acp.PermissionOption{
				{OptionId: optDiscard, Kind: acp.PermissionOptionKindAllowOnce, Name: "Discard it and continue"},
				{OptionId: optKeep, Kind: acp.PermissionOptionKindRejectOnce, Name: "Keep it (send nothing)"},
			},
			Meta: map[string]any{"sessiond": map[string]any{"kind": "unknown_execution", "admission_id": u.AdmissionID,
				"execution_generation": *u.ExecutionGeneration}},
		})
		ch <- answer{resp, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			t.b.log.Warn("session/request_permission failed; keeping the unknown turn", "admission", u.AdmissionID, "err", a.err)
			return false, nil
		}
		return a.resp.Outcome.Selected != nil && a.resp.Outcome.Selected.OptionId == optDiscard, nil
	case <-t.cancelCh:
		t.cancelRequested = true
		return false, nil
	case <-c.Done():
		return false, errLost
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// ellipsize cuts s to at most n runes, marking the cut.
func ellipsize(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
