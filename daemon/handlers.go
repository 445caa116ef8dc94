package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

func (d *Daemon) routes() *rpc.Mux {
	m := &guardedMux{rpc.NewMux()}
	defer func() { m.Wrap(wireHandler) }()
	m.Handle(protocol.MethodInitialize, rpc.Typed(d.initialize))
	m.Handle(protocol.MethodDaemonInfo, d.daemonInfo)
	m.Handle(protocol.MethodSessionCreate, rpc.Typed(d.sessionCreate))
	m.Handle(protocol.MethodSessionResume, rpc.Typed(d.sessionResume))
	m.Handle(protocol.MethodSessionMessages, rpc.Typed(d.sessionMessages))
	m.Handle(protocol.MethodSessionList, rpc.Typed(d.sessionList))
	m.Handle(protocol.MethodPromptSubmit, d.metrics.timed(wireHandler(rpc.Typed(d.promptSubmit))))
	m.Handle(protocol.MethodPromptCancel, rpc.Typed(d.promptCancel))
	m.Handle(protocol.MethodInterrupt, rpc.Typed(d.sessionInterrupt))
	m.Handle(protocol.MethodResolveUnknown, rpc.Typed(d.resolveUnknown))
	m.Handle(protocol.MethodApprovalRespond, d.respond(prompts.KindApproval))
	m.Handle(protocol.MethodClarifyRespond, d.respond(prompts.KindClarify))
	m.Handle(protocol.MethodApprovalsList, rpc.Typed(d.approvalsList))
	m.Handle(protocol.MethodSessionUpdate, rpc.Typed(d.sessionUpdate))
	m.Handle(protocol.MethodSessionDelete, rpc.Typed(d.sessionDelete))
	m.Handle(protocol.MethodApprovalsRevoke, rpc.Typed(d.approvalsRevoke))
	m.Handle(protocol.MethodPairingCode, d.pairingCode)
	m.Handle(protocol.MethodClientsList, d.clientsList)
	m.Handle(protocol.MethodClientsRevoke, d.clientsRevoke)
	return m.Mux
}

// guardedMux registers every handler behind the paired clients' scope
// guard (pair.go).
type guardedMux struct{ *rpc.Mux }

func (m *guardedMux) Handle(method string, h rpc.Handler) { m.Mux.Handle(method, guard(method, h)) }

// wireHandler is the one error path of every handler: the error it
// returns goes through wireErr.
func wireHandler(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, c *rpc.Conn, params json.RawMessage) (any, error) {
		res, err := h(ctx, c, params)
		if err != nil {
			return nil, wireErr(err)
		}
		return res, nil
	}
}

// wireErr maps errors of the rooms below to their wire reasons; rpc.Errors
// pass through. The message keeps the detail for people.
func wireErr(err error) error {
	if err == nil {
		return nil
	}
	var re *protocol.Error
	if errors.As(err, &re) {
		return err
	}
	table := []struct {
		target error
		reason protocol.Reason
	}{
		{admission.ErrSessionNotFound, protocol.ReasonNotFound},
		{admission.ErrNotFound, protocol.ReasonNotFound},
		{prompts.ErrNotFound, protocol.ReasonNotFound},
		{admission.ErrConflict, protocol.ReasonAdmissionConflict},
		{admission.ErrCancelled, protocol.ReasonCancelled},
		{admission.ErrNotQueued, protocol.ReasonNotQueued},
		{admission.ErrUnknownExecution, protocol.ReasonUnknownExecution},
		{admission.ErrStaleGeneration, protocol.ReasonStaleGeneration},
		{prompts.ErrStaleGeneration, protocol.ReasonStaleGeneration},
		{admission.ErrSessionBusy, protocol.ReasonSessionBusy},
		{admission.ErrQueueFull, protocol.ReasonOverloaded},
		{prompts.ErrInvalidAnswer, protocol.ReasonInvalidParams},
		{store.ErrUnavailable, protocol.ReasonStorageUnavailable},
	}
	for _, t := range table {
		if errors.Is(err, t.target) {
			re := protocol.Errorf(t.reason, "%s", err.Error())
			if ie := (*admission.InputError)(nil); errors.As(err, &ie) {
				re = re.With("admission_id", ie.AdmissionID)
			}
			return re
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.Errorf(protocol.ReasonInternal, "request ended before it completed: %v", err)
	}
	return err
}

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return protocol.InvalidParams(field, "required")
	}
	return nil
}

func (d *Daemon) initialize(ctx context.Context, c *rpc.Conn, p protocol.InitializeParams) (any, error) {
	if p.Protocol != nil && *p.Protocol != protocol.Version {
		return nil, protocol.InvalidParams("protocol", "this daemon speaks protocol %d, not %d", protocol.Version, *p.Protocol)
	}
	c.SetValue(clientKey, p.Client)
	return protocol.InitializeResult{Protocol: protocol.Version, Version: Version, BootEpoch: int64(d.epoch)}, nil
}

func (d *Daemon) daemonInfo(ctx context.Context, c *rpc.Conn, params json.RawMessage) (any, error) {
	counts, err := admission.CountAll(ctx, d.db)
	if err != nil {
		return nil, err
	}
	info := protocol.DaemonInfo{Version: Version, Protocol: protocol.Version, PID: d.desc.PID, BootEpoch: int64(d.epoch),
		StartedAt: d.desc.StartedAt, Home: d.home, Sessions: counts.Sessions, RunningTurns: d.sched.RunningCount(),
		HeldSessions: counts.Held, OpenPrompts: counts.Prompts, Sandbox: d.sandboxInfo(d.cfg.Sandbox.Policy())}
	info.Storage = protocol.StorageInfo{Driver: string(d.db.Driver()), Database: d.db.Path()}
	owned, live, err := d.queue.ClusterCounts(ctx)
	if err != nil {
		return nil, err
	}
	info.Cluster = &protocol.ClusterInfo{Label: d.cfg.Cluster.Label, LeaseTTL: d.cfg.Cluster.LeaseTTL, OwnedSessions: owned, LiveDaemons: live}
	if st := d.db.LastCheckpoint(); !st.At.IsZero() {
		info.Storage.WALBytes, info.Storage.LastCheckpointAt, info.Storage.CheckpointBusy = st.WALBytes, store.FormatTime(st.At), st.Busy
		if st.Err != nil {
			info.Storage.CheckpointError = st.Err.Error()
		}
	}
	return info, nil
}

func (d *Daemon) sessionCreate(ctx context.Context, c *rpc.Conn, p protocol.SessionCreateParams) (any, error) {
	if d.draining.Load() {
		return nil, protocol.Errorf(protocol.ReasonDraining, "the daemon is stopping and creates no sessions")
	}
	if err := d.normalizeCreate(&p); err != nil {
		return nil, err
	}
	var id string
	err := d.db.InTx(ctx, func(tx *store.Tx) (err error) {
		id, err = d.createSession(tx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.audit().Info("session created", append(connAttrs(c), "session_id", id, "cwd", p.Cwd, "model", p.Model, "provider", p.Provider)...)
	return d.resume(c, id, nil)
}

func (d *Daemon) sessionResume(ctx context.Context, c *rpc.Conn, p protocol.ResumeParams) (any, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return nil, err
	}
	if p.AfterSeq != nil && *p.AfterSeq < 0 {
		return nil, protocol.InvalidParams("after_seq", "must be >= 0")
	}
	return d.resume(c, p.SessionID, p.AfterSeq)
}

// resume subscribes c to the session, then reads the snapshot, and releases
// buffered events once the response is queued: the client sees the
// snapshot first, then every event with seq > last_seq exactly once.
func (d *Daemon) resume(c *rpc.Conn, sessionID string, afterSeq *int64) (any, error) {
	release := d.hub.subscribe(c, sessionID)
	snap, err := d.snapshot(sessionID, afterSeq)
	if err != nil {
		d.hub.unsubscribe(c, sessionID)
		return nil, err
	}
	return rpc.AfterReply(snap, func() { release(snap.LastSeq) }), nil
}

// summary is the wire shape of a session.list row.
func summary(r admission.Summary) protocol.SessionSummary {
	return protocol.SessionSummary{SessionID: r.SessionID, Title: r.Title, Cwd: r.Cwd, CreatedAt: r.CreatedAt,
		Running: r.Running, PendingCount: r.PendingCount, UnknownCount: r.UnknownCount, OpenPromptCount: r.OpenPrompts}
}

func (d *Daemon) sessionList(ctx context.Context, c *rpc.Conn, p protocol.SessionListParams) (any, error) {
	if p.Limit < 0 {
		return nil, protocol.InvalidParams("limit", "must be positive")
	}
	if p.Limit == 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, 500)
	f := admission.ListFilter{Limit: p.Limit + 1}
	if p.Cursor != "" {
		at, id, err := parseListCursor(p.Cursor)
		if err != nil {
			return nil, protocol.InvalidParams("cursor", "not a cursor returned by session.list")
		}
		f.BeforeAt, f.BeforeID = at, id
	}
	// A session-scoped paired client sees its session only.
	f.SessionID = identOf(c).SessionID
	var rows []admission.Summary
	err := d.db.ReadTx(ctx, func(tx *store.Reads) error {
		var err error
		rows, err = admission.List(tx, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := protocol.SessionList{Sessions: []protocol.SessionSummary{}}
	for i, r := range rows {
		if i == p.Limit {
			last := rows[i-1]
			out.NextCursor = listCursor(last.CreatedAt, last.SessionID)
			break
		}
		out.Sessions = append(out.Sessions, summary(r))
	}
	return out, nil
}

func (d *Daemon) promptSubmit(ctx context.Context, c *rpc.Conn, p protocol.SubmitParams) (any, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return nil, err
	}
	if !admission.ValidInputID(p.InputID) {
		return nil, protocol.InvalidParams("input_id", "must be 1-128 characters of [A-Za-z0-9._:-]")
	}
	if p.Text == "" {
		return nil, protocol.InvalidParams("text", "required and non-empty")
	}
	if n, max := len(p.Text)+len(p.Attachments), d.cfg.Limits.MaxInputBytes; n > max {
		return nil, protocol.InvalidParams("text", "input is %d bytes; the limit is %d (limits.max_input_bytes)", n, max)
	}
	if len(p.Attachments) > 0 && string(p.Attachments) != "null" {
		canon, err := canonicalArray(p.Attachments)
		if err != nil {
			return nil, protocol.InvalidParams("attachments", "%v", err)
		}
		p.Attachments = canon
	} else {
		p.Attachments = nil
	}
	if d.draining.Load() {
		return nil, protocol.Errorf(protocol.ReasonDraining, "the daemon is stopping and admits nothing new; retry after it restarts")
	}
	rec, err := d.queue.Admit(ctx, admission.AdmitRequest{SessionID: p.SessionID, InputID: p.InputID,
		Text: p.Text, Attachments: p.Attachments, Sender: senderJSON(c), Take: d.sched.FreeSlots() > 0}, d.sched.AtCapacity)
	if err != nil {
		return nil, err
	}
	if !rec.Duplicate {
		d.sched.Wake(p.SessionID)
	}
	return receiptToWire(rec), nil
}

// canonicalArray re-encodes a JSON array with sorted object keys and no
// insignificant whitespace, so that the payload digest compares meaning,
// not formatting. Numbers keep their text.
func canonicalArray(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v []any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("must be an array")
	}
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

func (d *Daemon) promptCancel(ctx context.Context, c *rpc.Conn, p protocol.AdmissionRef) (any, error) {
	if err := errors.Join(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return nil, err
	}
	a, err := d.queue.Cancel(ctx, p.SessionID, p.AdmissionID)
	if err != nil {
		return nil, err
	}
	return receiptToWire(a.Receipt()), nil
}

func (d *Daemon) sessionInterrupt(ctx context.Context, c *rpc.Conn, p protocol.InterruptParams) (any, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return nil, err
	}
	s, err := getSession(d.db.Reads(ctx), p.SessionID)
	if err != nil {
		return nil, err
	}
	if p.ExecutionGeneration != nil && *p.ExecutionGeneration != s.ExecutionGeneration {
		return nil, protocol.Errorf(protocol.ReasonStaleGeneration, "execution_generation %d is not the live one (%d)",
			*p.ExecutionGeneration, s.ExecutionGeneration).With("execution_generation", s.ExecutionGeneration)
	}
	var gen int64
	if p.ExecutionGeneration != nil {
		gen = *p.ExecutionGeneration
	}
	a, ok, err := d.sched.Interrupt(ctx, p.SessionID, gen)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Not running here: it may run on another daemon of the cluster.
		return d.interruptElsewhere(ctx, p.SessionID, gen)
	}
	id := a.AdmissionID
	return protocol.InterruptResult{Interrupted: &id}, nil
}

func (d *Daemon) resolveUnknown(ctx context.Context, c *rpc.Conn, p protocol.ResolveUnknownParams) (any, error) {
	if err := errors.Join(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return nil, err
	}
	if p.ExecutionGeneration == nil {
		return nil, protocol.InvalidParams("execution_generation", "required: the generation of the unknown admission")
	}
	a, err := d.queue.ResolveUnknownBy(ctx, p.SessionID, p.AdmissionID, *p.ExecutionGeneration, senderJSON(c), d.closePrompts)
	if err != nil {
		return nil, err
	}
	// The operator's decision, for whoever is on call next.
	d.audit().Warn("an unknown admission was resolved by a client: it will never run again; its session's queue moves on",
		append(connAttrs(c), "session_id", a.SessionID, "admission_id", a.AdmissionID, "execution_generation", a.Generation(), "outcome", a.Outcome.String)...)
	d.sched.Wake(p.SessionID)
	return receiptToWire(a.Receipt()), nil
}

// closePrompts is the settle hook: it closes the turn's open prompts in the
// settling transaction.
func (d *Daemon) closePrompts(tx *store.Tx, a admission.Admission, resolution string) error {
	return d.prompts.CloseForAdmission(tx, a.SessionID, a.AdmissionID, resolution)
}

func (d *Daemon) respond(kind string) rpc.Handler {
	return rpc.Typed(func(ctx context.Context, c *rpc.Conn, p protocol.RespondParams) (any, error) {
		if err := errors.Join(required("session_id", p.SessionID), required("prompt_id", p.PromptID)); err != nil {
			return nil, err
		}
		if p.ExecutionGeneration == nil {
			return nil, protocol.InvalidParams("execution_generation", "required: the prompt's execution_generation")
		}
		var answer json.RawMessage
		switch kind {
		case prompts.KindApproval:
			if !prompts.ValidChoice(string(p.Choice)) {
				return nil, protocol.InvalidParams("choice", "must be once, session, always or deny")
			}
			answer, _ = json.Marshal(protocol.ApprovalResponse{Choice: p.Choice})
		default:
			// A null answer is no answer: it would resolve the prompt
			// with an empty reply the user never gave.
			if len(p.Answer) == 0 || string(p.Answer) == "null" {
				return nil, protocol.InvalidParams("answer", "required: a string or a list of strings")
			}
			a, ok := clarifyAnswer(p.Answer)
			if !ok {
				return nil, protocol.InvalidParams("answer", "must be a string or a list of strings")
			}
			answer, _ = json.Marshal(protocol.ClarifyResponse{Answer: a})
		}
		status, err := d.prompts.Respond(ctx, prompts.Response{SessionID: p.SessionID, PromptID: p.PromptID,
			Kind: kind, Generation: *p.ExecutionGeneration, Answer: answer, AnsweredBy: answeredBy(c)})
		if err != nil {
			return nil, err
		}
		d.auditAnswer(c, p, kind, status, answer)
		return protocol.RespondResult{Status: protocol.RespondStatus(status), PromptID: p.PromptID}, nil
	})
}

// clarifyAnswer decodes a clarify answer: a string, or a list of strings
// with no null among them (a null is no answer, not an empty one). It
// returns a string or a []string.
func clarifyAnswer(raw json.RawMessage) (any, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil && string(raw) != "null" {
		return s, true
	}
	var list []*string
	if json.Unmarshal(raw, &list) != nil || list == nil || slices.Contains(list, nil) {
		return nil, false
	}
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = *x
	}
	return out, true
}

func (d *Daemon) approvalsList(ctx context.Context, c *rpc.Conn, p protocol.ApprovalsListParams) (any, error) {
	always, err := d.prompts.AlwaysAllowed(ctx)
	if err != nil {
		return nil, err
	}
	out := protocol.ApprovalsList{Always: make([]protocol.AllowRule, 0, len(always))}
	for _, r := range always {
		out.Always = append(out.Always, protocol.AllowRule{Pattern: r.Pattern, CreatedAt: r.CreatedAt})
	}
	if p.SessionID != "" {
		if _, err := getSession(d.db.Reads(ctx), p.SessionID); err != nil {
			return nil, err
		}
		rs, err := d.prompts.SessionAllowed(ctx, p.SessionID)
		if err != nil {
			return nil, err
		}
		out.Session = make([]protocol.AllowRule, 0, len(rs))
		for _, r := range rs {
			out.Session = append(out.Session, protocol.AllowRule{Pattern: r.Pattern, CreatedAt: r.CreatedAt})
		}
	}
	return out, nil
}
