package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sessiond/sessiond/protocol"
)

// This file holds ACP 1.0's session methods beyond new, load and prompt:
// session/list, session/resume, session/close, session/delete, and the
// session's configuration (configOptions, session/set_mode,
// session/set_config_option), which session.update makes durable in the
// daemon.

// Config option ids of a session (configOptions).
const (
	optMode    = "mode"    // approvals mode: manual | strict | off
	optModel   = "model"   // the model of the session's next turns
	optSandbox = "sandbox" // sandbox mode, narrowing only
)

// approvalModes are the session modes (and the values of the "mode"
// option): the daemon's approvals modes.
var approvalModes = []struct{ id, name, desc string }{
	{"manual", "Ask", "Ask before running a dangerous command"},
	{"strict", "Ask always", "Ask before running any command"},
	{"off", "Don't ask", "Run commands without asking (hardline commands stay refused; the sandbox still applies)"},
}

// sandboxModes are the values of the "sandbox" option, widest first; a
// session offers its own mode and the narrower ones.
var sandboxModes = []struct{ id, name, desc string }{
	{"off", "No sandbox", "Commands run unconfined"},
	{"workspace-write", "Workspace write", "Commands may write only under the session's directory and its writable roots"},
	{"read-only", "Read-only", "Commands may write nowhere but a private temp directory"},
}

// sessionState is what the config options are built from.
type sessionState struct {
	snap   protocol.Snapshot
	models []string
}

// state reads the session's settings and the daemon's model choices.
func (b *bridge) state(ctx context.Context, sessionID string) (sessionState, error) {
	var st sessionState
	if err := b.call(ctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: sessionID}, &st.snap); err != nil {
		return st, daemonErr(err)
	}
	var info protocol.DaemonInfo
	if err := b.call(ctx, protocol.MethodDaemonInfo, nil, &info); err != nil {
		return st, daemonErr(err)
	}
	st.models = info.Models
	return st, nil
}

func selectOption(id, name, desc string, cat *acp.SessionConfigOptionCategory, current string, opts []acp.SessionConfigSelectOption) acp.SessionConfigOption {
	u := acp.SessionConfigSelectOptionsUngrouped(opts)
	return acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{
		Type: "select", Id: acp.SessionConfigId(id), Name: name, Description: &desc, Category: cat,
		CurrentValue: acp.SessionConfigValueId(current), Options: acp.SessionConfigSelectOptions{Ungrouped: &u}}}
}

// modelChoices are the model option's values: the daemon's models, then the
// session's own when it is none of them.
func (st sessionState) modelChoices() []string {
	ms := slices.Clone(st.models)
	if st.snap.Model != "" && !slices.Contains(ms, st.snap.Model) {
		ms = append(ms, st.snap.Model)
	}
	return ms
}

// sandboxChoices are the sandbox option's values: the session's mode and
// the narrower ones.
func (st sessionState) sandboxChoices() []string {
	var out []string
	on := false
	for _, m := range sandboxModes {
		on = on || m.id == st.snap.Sandbox.Mode
		if on {
			out = append(out, m.id)
		}
	}
	if len(out) == 0 {
		out = []string{st.snap.Sandbox.Mode}
	}
	return out
}

// configOptions are the session's options: approvals mode, model and
// sandbox, with their current values.
func (st sessionState) configOptions() []acp.SessionConfigOption {
	var modes, models, boxes []acp.SessionConfigSelectOption
	for _, m := range approvalModes {
		modes = append(modes, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m.id), Name: m.name, Description: acp.Ptr(m.desc)})
	}
	for _, m := range st.modelChoices() {
		models = append(models, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m), Name: m})
	}
	for _, id := range st.sandboxChoices() {
		o := acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(id), Name: id}
		for _, m := range sandboxModes {
			if m.id == id {
				o.Name, o.Description = m.name, acp.Ptr(m.desc)
			}
		}
		boxes = append(boxes, o)
	}
	net := "network off"
	if st.snap.Sandbox.Network {
		net = "network on"
	}
	return []acp.SessionConfigOption{
		selectOption(optMode, "Approvals", "When the agent asks before running a command (the daemon's approvals mode, for this session)",
			acp.Ptr(acp.SessionConfigOptionCategoryMode), st.snap.ApprovalMode, modes),
		selectOption(optModel, "Model", "The model of the session's next turns",
			acp.Ptr(acp.SessionConfigOptionCategoryModel), st.snap.Model, models),
		selectOption(optSandbox, "Sandbox", "Where commands may write ("+net+"); it can only be narrowed",
			nil, st.snap.Sandbox.Mode, boxes),
	}
}

// modeState is the session's approvals mode as ACP session modes.
func (st sessionState) modeState() *acp.SessionModeState {
	ms := &acp.SessionModeState{CurrentModeId: acp.SessionModeId(st.snap.ApprovalMode)}
	for _, m := range approvalModes {
		ms.AvailableModes = append(ms.AvailableModes, acp.SessionMode{Id: acp.SessionModeId(m.id), Name: m.name, Description: acp.Ptr(m.desc)})
	}
	return ms
}

// ListSessions pages through the daemon's sessions (session.list), keeping
// those in p.Cwd when given. The cursor is the daemon's.
func (b *bridge) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	resp := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	lp := protocol.SessionListParams{Limit: 50}
	if p.Cursor != nil {
		lp.Cursor = *p.Cursor
	}
	// With a cwd filter, pages without a match are skipped (a bounded
	// number of them) so that the editor does not get a run of empty pages.
	for range 20 {
		var l protocol.SessionList
		if err := b.call(ctx, protocol.MethodSessionList, lp, &l); err != nil {
			return acp.ListSessionsResponse{}, daemonErr(err)
		}
		for _, s := range l.Sessions {
			if p.Cwd != nil && *p.Cwd != "" && s.Cwd != *p.Cwd {
				continue
			}
			info := acp.SessionInfo{SessionId: acp.SessionId(s.SessionID), Cwd: s.Cwd,
				Meta: map[string]any{"sessiond": map[string]any{"created_at": s.CreatedAt, "running": s.Running,
					"pending_count": s.PendingCount, "unknown_count": s.UnknownCount, "open_prompt_count": s.OpenPromptCount}}}
			if s.Title != "" {
				info.Title = acp.Ptr(s.Title)
			}
			resp.Sessions = append(resp.Sessions, info)
		}
		resp.NextCursor = nil
		if l.NextCursor != "" {
			resp.NextCursor = acp.Ptr(l.NextCursor)
		}
		if len(resp.Sessions) > 0 || l.NextCursor == "" {
			break
		}
		lp.Cursor = l.NextCursor
	}
	return resp, nil
}

// ResumeSession reopens a daemon session without replaying its history
// (session/load replays it).
func (b *bridge) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	st, err := b.state(ctx, string(p.SessionId))
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	return acp.ResumeSessionResponse{ConfigOptions: st.configOptions(), Modes: st.modeState(), Meta: mcpMeta(len(p.McpServers), st.snap)}, nil
}

// CloseSession ends the editor's use of a session: this bridge's prompts
// in flight on it are cancelled as by session/cancel (a queued input is
// withdrawn, a running turn interrupted) and the bridge forgets it. The
// daemon session and its history stay (session/delete removes them).
func (b *bridge) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	var snap protocol.Snapshot
	if err := b.call(ctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: string(p.SessionId)}, &snap); err != nil {
		return acp.CloseSessionResponse{}, daemonErr(err)
	}
	b.mu.Lock()
	var ts []*acpTurn
	for t := range b.turns[string(p.SessionId)] {
		ts = append(ts, t)
	}
	delete(b.notes, string(p.SessionId))
	b.mu.Unlock()
	for _, t := range ts {
		t.requestCancel()
	}
	return acp.CloseSessionResponse{}, nil
}

// deleteSession is ACP's session/delete: session.delete in the daemon
// (refused with session_busy while a turn runs or an input is queued,
// unknown_execution while a
// crash's turn holds the session).
func (b *bridge) deleteSession(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" {
		return nil, acp.NewInvalidParams(map[string]any{"reason": "invalid_params", "error": "sessionId is required"})
	}
	if err := b.call(ctx, protocol.MethodSessionDelete, protocol.SessionDeleteParams{SessionID: p.SessionID}, nil); err != nil {
		return nil, daemonErr(err)
	}
	b.mu.Lock()
	delete(b.notes, p.SessionID)
	b.mu.Unlock()
	return map[string]any{}, nil
}

// HandleExtensionMethod serves the methods the frame filter routes here
// (session/delete) and refuses the other extension methods.
func (b *bridge) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == deleteMethod {
		return b.deleteSession(ctx, params)
	}
	return nil, acp.NewMethodNotFound(method)
}

// SetSessionMode sets the session's approvals mode (session.update).
func (b *bridge) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	if err := b.setOption(ctx, string(p.SessionId), optMode, string(p.ModeId)); err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	return acp.SetSessionModeResponse{}, nil
}

// SetSessionConfigOption applies one option durably (session.update) and
// answers with every option's new value.
func (b *bridge) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"reason": "invalid_params",
			"error": "sessiond's options are selects: give a value id"})
	}
	sid := string(p.ValueId.SessionId)
	if err := b.setOption(ctx, sid, string(p.ValueId.ConfigId), string(p.ValueId.Value)); err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	st, err := b.state(ctx, sid)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: st.configOptions()}, nil
}

// setOption checks value against the option's values and writes it with
// session.update; it tells the editor the new state with a
// config_option_update (and current_mode_update for the mode).
func (b *bridge) setOption(ctx context.Context, sessionID, option, value string) error {
	st, err := b.state(ctx, sessionID)
	if err != nil {
		return err
	}
	bad := func(choices []string) error {
		return acp.NewInvalidParams(map[string]any{"reason": "invalid_params", "option": option,
			"error": fmt.Sprintf("%q is not a value of option %q; its values: %q", value, option, choices)})
	}
	up := protocol.SessionUpdateParams{SessionID: sessionID}
	switch option {
	case optMode:
		var ids []string
		for _, m := range approvalModes {
			ids = append(ids, m.id)
		}
		if !slices.Contains(ids, value) {
			return bad(ids)
		}
		up.ApprovalMode = &value
	case optModel:
		if cs := st.modelChoices(); !slices.Contains(cs, value) {
			return bad(cs)
		}
		up.Model = &value
	case optSandbox:
		if cs := st.sandboxChoices(); !slices.Contains(cs, value) {
			return bad(cs) // wider than the session's: a sandbox is only ever narrowed
		}
		up.Sandbox = &protocol.SandboxParams{Mode: value}
	default:
		return acp.NewInvalidParams(map[string]any{"reason": "invalid_params", "option": option,
			"error": fmt.Sprintf("unknown option %q; sessiond's options: mode, model, sandbox", option)})
	}
	if err := b.call(ctx, protocol.MethodSessionUpdate, up, nil); err != nil {
		return daemonErr(err)
	}
	if st, err = b.state(ctx, sessionID); err == nil {
		sid := acp.SessionId(sessionID)
		b.client().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.SessionUpdate{
			ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{SessionUpdate: "config_option_update", ConfigOptions: st.configOptions()}}})
		if option == optMode {
			b.client().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.SessionUpdate{
				CurrentModeUpdate: &acp.SessionCurrentModeUpdate{SessionUpdate: "current_mode_update", CurrentModeId: acp.SessionModeId(value)}}})
		}
	}
	return nil
}

// cancelRequest is $/cancel_request of the editor's request key (the
// frame filter calls it before the SDK cancels the request's context): a
// prompt in flight is cancelled as by session/cancel and answers -32800;
// other requests end through their context.
func (b *bridge) cancelRequest(key string) {
	b.mu.Lock()
	t := b.byRequest[key]
	if t == nil {
		b.cancelledReqs[key] = true // its prompt has not registered yet
	}
	b.mu.Unlock()
	if t != nil {
		t.cancelByRequest()
	}
}

// forgetRequest drops what $/cancel_request recorded of the editor's
// request key once the request is answered (it was not a prompt, or its
// prompt never registered).
func (b *bridge) forgetRequest(key string) {
	b.mu.Lock()
	delete(b.cancelledReqs, key)
	b.mu.Unlock()
}

// mcpMeta is the _meta of session/load and session/resume when the editor
// gives MCP servers: a session's servers are frozen at its session/new
// (PROTOCOL.md 10.1), so it names the ones the session has instead.
func mcpMeta(given int, snap protocol.Snapshot) map[string]any {
	if given == 0 {
		return nil
	}
	names := []string{}
	for _, s := range snap.MCPServers {
		names = append(names, s.Name)
	}
	return map[string]any{"sessiond": map[string]any{"mcpServers": names,
		"note": "a session's MCP servers are those of its session/new; the ones given to session/load or session/resume are not applied"}}
}
