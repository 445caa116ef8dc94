package daemon

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/mcp"
)

// sessionRow is one sessions row.
type sessionRow = store.Session

// getSession reads session id; a not_found refusal when there is none.
func getSession(q store.Queryer, id string) (sessionRow, error) {
	s, err := store.GetSession(q, id)
	if errors.Is(err, sql.ErrNoRows) {
		return s, protocol.Errorf(protocol.ReasonNotFound, "unknown session %q", id).With("session_id", id)
	}
	return s, err
}

// defaultOpenAIBaseURL is used for provider openai when neither the session,
// config.yaml nor OPENAI_BASE_URL names one.
const defaultOpenAIBaseURL = "https://api.openai.com/v1"

// normalizeCreate validates session.create params and fills defaults from
// the config, freezing the launch settings.
func (d *Daemon) normalizeCreate(p *protocol.SessionCreateParams) error {
	if p.Cwd == "" {
		p.Cwd = d.cfg.Terminal.Cwd
	}
	if p.Cwd == "" {
		return protocol.InvalidParams("cwd", "required: an absolute path of an existing directory")
	}
	if !filepath.IsAbs(p.Cwd) {
		return protocol.InvalidParams("cwd", "%q is not absolute", p.Cwd)
	}
	st, err := os.Stat(p.Cwd)
	if err != nil {
		return protocol.InvalidParams("cwd", "%q does not exist", p.Cwd)
	}
	if !st.IsDir() {
		return protocol.InvalidParams("cwd", "%q is not a directory", p.Cwd)
	}
	// The real path, stored: the sandbox's helper refuses a command when a
	// symlink has taken the cwd's place since (sandbox.ErrSymlinkSwapped).
	p.Cwd = sandbox.RealPath(p.Cwd)
	if p.Provider == "" {
		p.Provider = d.cfg.Model.Provider
	}
	if p.Provider != "openai" && p.Provider != "custom" {
		return protocol.InvalidParams("provider", "%q is not supported; use openai or custom (both speak OpenAI-compatible Chat Completions)", p.Provider)
	}
	if p.Model == "" {
		p.Model = d.cfg.Model.Default
	}
	if p.Model == "" {
		return protocol.InvalidParams("model", "required: no model given and no model.default in config.yaml")
	}
	if p.BaseURL == "" {
		p.BaseURL = d.cfg.Model.BaseURL
	}
	if p.BaseURL == "" {
		if p.Provider == "custom" {
			return protocol.InvalidParams("base_url", "required for provider custom")
		}
		p.BaseURL = defaultOpenAIBaseURL
	}
	if !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://") {
		return protocol.InvalidParams("base_url", "%q must be an http:// or https:// URL", p.BaseURL)
	}
	if p.Toolsets == nil {
		ts := []string{"terminal", "clarify"}
		p.Toolsets = &ts
	}
	for _, t := range *p.Toolsets {
		if !tools.ValidToolset(t) {
			return protocol.InvalidParams("toolsets", "unknown toolset %q; known: terminal, clarify", t)
		}
	}
	if len(p.Title) > 500 {
		return protocol.InvalidParams("title", "longer than 500 bytes")
	}
	if p.RequestID != "" && !admission.ValidInputID(p.RequestID) {
		return protocol.InvalidParams("request_id", "must be 1-128 characters of [A-Za-z0-9._:-]")
	}
	// Freeze the sandbox: the configured one, narrowed as asked.
	var sp protocol.SandboxParams
	if p.Sandbox != nil {
		sp = *p.Sandbox
	}
	pol, err := d.cfg.Sandbox.Policy().Narrow(sandbox.Mode(sp.Mode), sp.Network, sp.WritableRoots)
	if err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		return protocol.InvalidParams(field, "%s", msg)
	}
	p.Sandbox = &protocol.SandboxParams{Mode: string(pol.Mode), Network: &pol.Network, WritableRoots: pol.WritableRoots}
	// A remote server given by a client reaches the network through the
	// daemon: only where the session's sandbox has the network anyway.
	for i, m := range p.MCPServers {
		if m.URL != "" && pol.Mode != sandbox.ModeOff && !pol.Network {
			return protocol.InvalidParams(fmt.Sprintf("mcp_servers[%d].url", i), "the session's sandbox has the network off, so a "+
				"remote MCP server given with session.create would widen it; declare the server in config.yaml's mcp.servers, "+
				"or give a stdio server")
		}
	}
	if _, err := mcp.Merge(d.cfg.MCP.ServerParams(), p.MCPServers); err != nil {
		return err
	}
	return nil
}

// mcpServers returns the session's frozen MCP servers; sessions created
// before 0007 take the configured ones.
func (d *Daemon) mcpServers(s sessionRow) []mcp.Server {
	if s.MCPServers.Valid {
		if list, err := mcp.Decode(s.MCPServers.String); err == nil {
			return list
		}
		d.log.Error("a session's stored MCP servers cannot be read; it gets none", "session_id", s.SessionID)
		return nil
	}
	list, _ := mcp.Merge(d.cfg.MCP.ServerParams(), nil)
	return list
}

// policy returns the session's frozen sandbox; sessions created before
// sandboxes existed take the configured one.
func (d *Daemon) policy(s sessionRow) sandbox.Policy {
	var p sandbox.Policy
	if !s.Sandbox.Valid || json.Unmarshal([]byte(s.Sandbox.String), &p) != nil || p.Validate() != nil {
		return d.cfg.Sandbox.Policy()
	}
	if p.WritableRoots == nil {
		p.WritableRoots = []string{}
	}
	p.ReadableRoots = d.cfg.Sandbox.Policy().ReadableRoots // the operator's, at every command
	return p
}

// approvalMode is the session's approvals mode: its own (session.update),
// else the configured one.
func (d *Daemon) approvalMode(s sessionRow) string {
	if s.ApprovalMode.Valid && s.ApprovalMode.String != "" {
		return s.ApprovalMode.String
	}
	return d.cfg.Approvals.Mode
}

// models are daemon.info's models: model.default, then model.choices,
// without repeats or blanks.
func (d *Daemon) models() []string {
	out := []string{}
	for _, m := range append([]string{d.cfg.Model.Default}, d.cfg.Model.Choices...) {
		if m = strings.TrimSpace(m); m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// sandboxInfo describes policy p on the wire, with whether this daemon
// enforces it.
func (d *Daemon) sandboxInfo(p sandbox.Policy) protocol.SandboxInfo {
	info := protocol.SandboxInfo{Mode: string(p.Mode), Network: p.Network, WritableRoots: p.WritableRoots, Available: true}
	switch {
	case p.Mode == sandbox.ModeOff:
		info.Available, info.Reason = false, "sandbox mode is off: commands run unsandboxed"
	case d.sandboxErr != nil:
		info.Available, info.Reason = false, d.sandboxErr.Error()+"; every command needs approval"
	}
	return info
}

func createDigest(p protocol.SessionCreateParams) string {
	p.RequestID = ""
	b, _ := json.Marshal(p)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// createSession inserts the session (or returns the one created earlier
// with the same request_id and params).
func (d *Daemon) createSession(tx *store.Tx, p protocol.SessionCreateParams) (string, error) {
	digest := createDigest(p)
	// existing answers with the session created earlier under the
	// request_id (found=false when there is none).
	existing := func() (id string, found bool, err error) {
		s, err := store.SessionByCreateRequest(tx, p.RequestID)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		} else if err != nil {
			return "", false, err
		}
		if s.CreateDigest.String != digest {
			return "", true, protocol.Errorf(protocol.ReasonAdmissionConflict, "request_id %q already created session %s with other params", p.RequestID, s.SessionID).With("session_id", s.SessionID)
		}
		return s.SessionID, true, nil
	}
	if p.RequestID != "" {
		if id, found, err := existing(); found || err != nil {
			return id, err
		}
	}
	id := "ses_" + uuid.Must(uuid.NewV7()).String()
	ts, _ := json.Marshal(*p.Toolsets)
	var reqID, dig sql.NullString
	if p.RequestID != "" {
		reqID = sql.NullString{String: p.RequestID, Valid: true}
		dig = sql.NullString{String: digest, Valid: true}
	}
	var sb sql.NullString
	if p.Sandbox != nil {
		pol := sandbox.Policy{Mode: sandbox.Mode(p.Sandbox.Mode), WritableRoots: p.Sandbox.WritableRoots}
		if p.Sandbox.Network != nil {
			pol.Network = *p.Sandbox.Network
		}
		if pol.WritableRoots == nil {
			pol.WritableRoots = []string{}
		}
		b, _ := json.Marshal(pol)
		sb = sql.NullString{String: string(b), Valid: true}
	}
	servers, err := mcp.Merge(d.cfg.MCP.ServerParams(), p.MCPServers)
	if err != nil {
		return "", err
	}
	err = store.InsertSession(tx, store.NewSession{SessionID: id, Title: p.Title, Cwd: p.Cwd, Model: p.Model, Provider: p.Provider,
		BaseURL: p.BaseURL, Toolsets: string(ts), Source: p.Source, CreateRequestID: reqID, CreateDigest: dig, CreatedAt: store.Now(),
		Sandbox: sb, PinLabel: sql.NullString{String: d.cfg.Cluster.Label, Valid: d.cfg.Cluster.Label != ""},
		MCPServers: sql.NullString{String: mcp.Encode(servers), Valid: true}})
	if errors.Is(err, store.ErrCreateRequestTaken) {
		// A concurrent create with the same request_id committed after the
		// look-up above (PostgreSQL, READ COMMITTED): this statement's
		// snapshot sees it.
		id, found, err := existing()
		if err == nil && !found {
			err = fmt.Errorf("session.create: request_id %q conflicted but no session holds it", p.RequestID)
		}
		return id, err
	}
	return id, err
}

// snapshot reads the session's state in one WAL snapshot.
func (d *Daemon) snapshot(sessionID string, afterSeq *int64) (*protocol.Snapshot, error) {
	var snap protocol.Snapshot
	err := d.db.ReadTx(d.ctx, func(tx *store.Reads) error {
		s, err := getSession(tx, sessionID)
		if err != nil {
			return err
		}
		snap = protocol.Snapshot{SessionID: s.SessionID, Title: s.Title, Cwd: s.Cwd, Model: s.Model, Provider: s.Provider,
			BaseURL: s.BaseURL, Toolsets: s.ToolsetNames(), Source: s.Source, CreatedAt: s.CreatedAt, Sandbox: d.sandboxInfo(d.policy(s)),
			ApprovalMode: d.approvalMode(s), MCPServers: d.mcp.status(s.SessionID, d.mcpServers(s)),
			ExecutionGeneration: s.ExecutionGeneration, LastSeq: s.LastEventSeq,
			Messages: []protocol.Message{}, Prompts: []protocol.Prompt{}, Pending: []protocol.Receipt{}}
		// Bounded whatever the session's size: the newest messages only
		// (session.messages pages back), long fields cut.
		page, err := store.TranscriptPage(tx, d.db.Driver(), sessionID, 0, protocol.MaxSnapshotMessages, protocol.MaxSnapshotBytes, protocol.MaxSnapshotTextBytes)
		if err != nil {
			return err
		}
		snap.Messages = pageWire(page)
		snap.MessagesTruncated = page.More
		pending, more, err := admission.PendingBounded(tx, d.db.Driver(), sessionID, protocol.MaxSnapshotPending, protocol.MaxSnapshotTextBytes)
		if err != nil {
			return err
		}
		snap.PendingTruncated = more
		for _, a := range pending {
			r := receiptToWire(a.Receipt())
			r.Text = a.Text
			snap.Pending = append(snap.Pending, r)
			if a.Status == admission.StatusStarted && !a.SteeredInto.Valid {
				id := a.AdmissionID
				snap.Running = &id
			}
		}
		annotateWaits(snap.Pending, d.sched.AtCapacity())
		// Any daemon's: the turn may run on another daemon of the cluster
		// (a takeover closes the prompts of the daemon it replaces).
		open, err := prompts.OpenForSession(tx, sessionID, 0)
		if err != nil {
			return err
		}
		for _, p := range open {
			if snap.Running == nil || p.AdmissionID != *snap.Running || p.ExecutionGeneration != s.ExecutionGeneration {
				continue // only prompts of the live execution
			}
			snap.Prompts = append(snap.Prompts, promptToWire(p))
		}
		if afterSeq != nil {
			evs, complete, err := d.db.EventsAfter(tx, sessionID, *afterSeq)
			if err != nil {
				return err
			}
			if !complete {
				snap.SnapshotRequired = true
			}
			snap.Events = make([]protocol.Event, 0, len(evs))
			for _, e := range evs {
				snap.Events = append(snap.Events, wireEvent(e))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &snap, nil
}

func annotateWaits(pending []protocol.Receipt, atCapacity bool) {
	admission.WaitReasons(pending, atCapacity)
}

// receiptToWire is the identity since admission.Receipt is
// protocol.Receipt; it stays for the handlers that call it.
func receiptToWire(r admission.Receipt) protocol.Receipt { return r }

func promptToWire(p prompts.Prompt) protocol.Prompt { return p.Wire() }

// listCursor encodes the position after the last listed session.
func listCursor(createdAt, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(createdAt + "|" + id))
}

func parseListCursor(c string) (createdAt, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", fmt.Errorf("bad cursor")
	}
	createdAt, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return "", "", fmt.Errorf("bad cursor")
	}
	return createdAt, id, nil
}

func pageWire(p store.Page) []protocol.Message {
	out := make([]protocol.Message, 0, len(p.Messages))
	for _, m := range p.Messages {
		w := messageWire(m)
		w.Truncated = p.Cut[m.ID]
		out = append(out, w)
	}
	return out
}

// sessionMessages is session.messages: a page of older messages than
// before_id (the newest when omitted), oldest first, bounded like a
// snapshot but with fields up to MaxSnapshotBytes.
func (d *Daemon) sessionMessages(ctx context.Context, c *rpc.Conn, p protocol.MessagesParams) (protocol.MessagesResult, error) {
	limit := p.Limit
	if limit == 0 {
		limit = protocol.DefaultMessagesLimit
	}
	limit = min(limit, protocol.MaxSnapshotMessages)
	var before int64
	if p.BeforeID != nil {
		before = *p.BeforeID
	}
	var out protocol.MessagesResult
	err := d.db.ReadTx(ctx, func(tx *store.Reads) error {
		if _, err := getSession(tx, p.SessionID); err != nil {
			return err
		}
		page, err := store.TranscriptPage(tx, d.db.Driver(), p.SessionID, before, limit, protocol.MaxSnapshotBytes, protocol.MaxSnapshotBytes)
		if err != nil {
			return err
		}
		out = protocol.MessagesResult{Messages: pageWire(page), HasMore: page.More}
		return nil
	})
	if err != nil {
		return protocol.MessagesResult{}, err
	}
	return out, nil
}
