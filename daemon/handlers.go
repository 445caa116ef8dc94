package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// routes binds one typed handler to every method of protocol.Methods that
// GET /rpc serves (every scope but pairing; auth.pair is pairRoutes'),
// behind the paired clients' scope guard (pair.go) and the one error path.
// The error names the rows without a handler and the handlers without a
// row (Mux.CheckTable); Start refuses to start with it.
func (d *Daemon) routes() (*rpc.Mux, error) {
	m := rpc.NewMux()
	rpc.Bind(m, protocol.MethodInitialize, d.initialize)
	rpc.Bind(m, protocol.MethodDaemonInfo, d.daemonInfo)
	rpc.Bind(m, protocol.MethodSessionCreate, d.sessionCreate)
	rpc.Bind(m, protocol.MethodSessionResume, d.sessionResume)
	rpc.Bind(m, protocol.MethodSessionMessages, d.sessionMessages)
	rpc.Bind(m, protocol.MethodSessionList, d.sessionList)
	rpc.Bind(m, protocol.MethodPromptSubmit, d.promptSubmit)
	rpc.Bind(m, protocol.MethodPromptCancel, d.promptCancel)
	rpc.Bind(m, protocol.MethodInterrupt, d.sessionInterrupt)
	rpc.Bind(m, protocol.MethodResolveUnknown, d.resolveUnknown)
	rpc.Bind(m, protocol.MethodApprovalRespond, d.respond(prompts.KindApproval))
	rpc.Bind(m, protocol.MethodClarifyRespond, d.respond(prompts.KindClarify))
	rpc.Bind(m, protocol.MethodApprovalsList, d.approvalsList)
	rpc.Bind(m, protocol.MethodSessionUpdate, d.sessionUpdate)
	rpc.Bind(m, protocol.MethodSessionDelete, d.sessionDelete)
	rpc.Bind(m, protocol.MethodApprovalsRevoke, d.approvalsRevoke)
	rpc.Bind(m, protocol.MethodPairingCode, d.pairingCode)
	rpc.Bind(m, protocol.MethodClientsList, d.clientsList)
	rpc.Bind(m, protocol.MethodClientsRevoke, d.clientsRevoke)
	rpc.Bind(m, protocol.MethodPromptUpdate, d.promptUpdate)
	rpc.Bind(m, protocol.MethodPromptMove, d.promptMove)
	rpc.Bind(m, protocol.MethodSessionFork, d.sessionFork)
	if err := m.CheckTable(rpcMethods()); err != nil {
		return nil, fmt.Errorf("GET /rpc: %w", err)
	}
	m.Wrap(func(name string, h rpc.Handler) rpc.Handler {
		spec, _ := protocol.Method(name) // the zero spec of a method not in the table fails closed in guard
		return wireHandler(guard(spec, h))
	})
	return m, nil
}

// rpcMethods are the rows of protocol.Methods that GET /rpc serves.
func rpcMethods() []protocol.MethodSpec {
	var out []protocol.MethodSpec
	for _, m := range protocol.Methods {
		if m.Scope != protocol.ScopePairing {
			out = append(out, m)
		}
	}
	return out
}

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
		{admission.ErrNotTerminal, protocol.ReasonNotTerminal},
		{admission.ErrNoTurn, protocol.ReasonInvalidParams},
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

func (d *Daemon) initialize(ctx context.Context, c *rpc.Conn, p protocol.InitializeParams) (protocol.InitializeResult, error) {
	if p.Protocol != nil && *p.Protocol != protocol.Version {
		return protocol.InitializeResult{}, protocol.InvalidParams("protocol", "this daemon speaks protocol %d, not %d", protocol.Version, *p.Protocol)
	}
	c.SetValue(clientKey, p.Client)
	return protocol.InitializeResult{Protocol: protocol.Version, Version: Version, BootEpoch: int64(d.epoch)}, nil
}

func (d *Daemon) daemonInfo(ctx context.Context, c *rpc.Conn, p protocol.DaemonInfoParams) (protocol.DaemonInfo, error) {
	counts, err := admission.CountAll(ctx, d.db)
	if err != nil {
		return protocol.DaemonInfo{}, err
	}
	info := protocol.DaemonInfo{Version: Version, Protocol: protocol.Version, PID: d.desc.PID, BootEpoch: int64(d.epoch),
		StartedAt: d.desc.StartedAt, Home: d.home, Sessions: counts.Sessions, RunningTurns: d.sched.RunningCount(),
		HeldSessions: counts.Held, OpenPrompts: counts.Prompts, Sandbox: d.sandboxInfo(d.cfg.Sandbox.Policy()),
		Models: d.models(), ApprovalMode: d.cfg.Approvals.Mode}
	info.Storage = protocol.StorageInfo{Driver: string(d.db.Driver()), Database: d.db.Path()}
	owned, live, err := d.queue.ClusterCounts(ctx)
	if err != nil {
		return protocol.DaemonInfo{}, err
	}
	info.Cluster = &protocol.ClusterInfo{Label: d.cfg.Cluster.Label, LeaseTTL: d.cfg.Cluster.LeaseTTL, OwnedSessions: owned, LiveDaemons: live}
	if scope := identOf(c).SessionID; scope != "" {
		// A client paired for one session sees the daemon as holding that
		// session alone: the others do not exist for it.
		sum, err := d.sessionSummary(ctx, scope)
		if err != nil {
			return protocol.DaemonInfo{}, err
		}
		info.Sessions, info.RunningTurns, info.HeldSessions, info.OpenPrompts = 1, 0, 0, sum.OpenPromptCount
		if sum.Running != nil {
			info.RunningTurns = 1
		}
		if sum.UnknownCount > 0 {
			info.HeldSessions = 1
		}
		info.Cluster.OwnedSessions = 0
	}
	if st := d.db.LastCheckpoint(); !st.At.IsZero() {
		info.Storage.WALBytes, info.Storage.LastCheckpointAt, info.Storage.CheckpointBusy = st.WALBytes, store.FormatTime(st.At), st.Busy
		if st.Err != nil {
			info.Storage.CheckpointError = st.Err.Error()
		}
	}
	return info, nil
}

func (d *Daemon) sessionCreate(ctx context.Context, c *rpc.Conn, p protocol.SessionCreateParams) (protocol.Snapshot, error) {
	if d.draining.Load() {
		return protocol.Snapshot{}, protocol.Errorf(protocol.ReasonDraining, "the daemon is stopping and creates no sessions")
	}
	if err := d.normalizeCreate(&p); err != nil {
		return protocol.Snapshot{}, err
	}
	var id string
	err := d.db.InTx(ctx, func(tx *store.Tx) (err error) {
		tx.Label("session.create")
		id, err = d.createSession(tx, p)
		return err
	})
	if err != nil {
		return protocol.Snapshot{}, err
	}
	d.audit().Info("session created", append(connAttrs(c), "session_id", id, "cwd", p.Cwd, "model", p.Model, "provider", p.Provider)...)
	return d.resume(ctx, c, id, nil)
}

func (d *Daemon) sessionResume(ctx context.Context, c *rpc.Conn, p protocol.ResumeParams) (protocol.Snapshot, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.Snapshot{}, err
	}
	if p.AfterSeq != nil && *p.AfterSeq < 0 {
		return protocol.Snapshot{}, protocol.InvalidParams("after_seq", "must be >= 0")
	}
	return d.resume(ctx, c, p.SessionID, p.AfterSeq)
}

// resume subscribes c to the session, then reads the snapshot, and releases
// buffered events once the response is queued: the client sees the
// snapshot first, then every event with seq > last_seq exactly once.
func (d *Daemon) resume(ctx context.Context, c *rpc.Conn, sessionID string, afterSeq *int64) (protocol.Snapshot, error) {
	release := d.hub.subscribe(c, sessionID)
	snap, err := d.snapshot(sessionID, afterSeq)
	if err != nil {
		d.hub.unsubscribe(c, sessionID)
		return protocol.Snapshot{}, err
	}
	rpc.OnReplied(ctx, func() { release(snap.LastSeq) })
	return *snap, nil
}

// summary is the wire shape of a session.list row.
func summary(r admission.Summary) protocol.SessionSummary {
	return protocol.SessionSummary{SessionID: r.SessionID, Title: r.Title, Cwd: r.Cwd, CreatedAt: r.CreatedAt,
		Running: r.Running, PendingCount: r.PendingCount, UnknownCount: r.UnknownCount, OpenPromptCount: r.OpenPrompts}
}

func (d *Daemon) sessionList(ctx context.Context, c *rpc.Conn, p protocol.SessionListParams) (protocol.SessionList, error) {
	if p.Limit < 0 {
		return protocol.SessionList{}, protocol.InvalidParams("limit", "must be positive")
	}
	if p.Limit == 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, 500)
	f := admission.ListFilter{Limit: p.Limit + 1}
	if p.Cursor != "" {
		at, id, err := parseListCursor(p.Cursor)
		if err != nil {
			return protocol.SessionList{}, protocol.InvalidParams("cursor", "not a cursor returned by session.list")
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
		return protocol.SessionList{}, err
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

func (d *Daemon) promptSubmit(ctx context.Context, c *rpc.Conn, p protocol.SubmitParams) (protocol.Receipt, error) {
	defer d.metrics.timeSubmit(time.Now())
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.Receipt{}, err
	}
	if !admission.ValidInputID(p.InputID) {
		return protocol.Receipt{}, protocol.InvalidParams("input_id", "must be 1-128 characters of [A-Za-z0-9._:-]")
	}
	if p.Text == "" {
		return protocol.Receipt{}, protocol.InvalidParams("text", "required and non-empty")
	}
	if n, max := len(p.Text)+len(p.Attachments), d.cfg.Limits.MaxInputBytes; n > max {
		return protocol.Receipt{}, protocol.InvalidParams("text", "input is %d bytes; the limit is %d (limits.max_input_bytes)", n, max)
	}
	var err error
	if p.Attachments, err = canonicalAttachments(p.Attachments); err != nil {
		return protocol.Receipt{}, err
	}
	switch p.WhenBusy {
	case "", protocol.WhenBusyQueue, protocol.WhenBusySteer, protocol.WhenBusyInterrupt, protocol.WhenBusyReject:
	default:
		return protocol.Receipt{}, protocol.InvalidParams("when_busy", "must be queue, steer, interrupt or reject, not %q", p.WhenBusy)
	}
	if d.draining.Load() {
		return protocol.Receipt{}, protocol.Errorf(protocol.ReasonDraining, "the daemon is stopping and admits nothing new; retry after it restarts")
	}
	req := admission.AdmitRequest{SessionID: p.SessionID, InputID: p.InputID,
		Text: p.Text, Attachments: p.Attachments, Sender: senderJSON(c), Take: d.sched.FreeSlots() > 0, WhenBusy: p.WhenBusy}
	// While a slot is free, an input to an idle session starts in the
	// admit's own commit (one commit instead of admit, then claim).
	atCapacity := d.sched.AtCapacity
	if r := d.sched.Reserve(p.SessionID); r != nil {
		defer r.Release()
		req.Start, atCapacity = r.Start, r.AtCapacity
	}
	res, err := d.queue.AdmitWith(ctx, req, atCapacity)
	if err != nil {
		return protocol.Receipt{}, err
	}
	rec := res.Receipt
	if res.Interrupt > 0 {
		// The request is durable and announced to another owner; here,
		// the running turn stops now and the input runs next. The
		// receipt does not wait for the turn to settle.
		go func() {
			ictx, cancel := context.WithTimeout(d.ctx, time.Minute)
			defer cancel()
			if _, _, err := d.sched.Interrupt(ictx, p.SessionID, res.Interrupt); err != nil {
				d.log.Warn("interrupt for a when_busy interrupt input", "session_id", p.SessionID, "err", err)
			}
		}()
	}
	if !rec.Duplicate && !res.Started {
		d.sched.Wake(p.SessionID)
	}
	return receiptToWire(rec), nil
}

// canonicalAttachments is canonicalArray for the attachments param: nil
// for none (absent or null), invalid_params when not an array.
func canonicalAttachments(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	canon, err := canonicalArray(raw)
	if err != nil {
		return nil, protocol.InvalidParams("attachments", "%v", err)
	}
	return canon, nil
}

func (d *Daemon) promptUpdate(ctx context.Context, c *rpc.Conn, p protocol.UpdateParams) (protocol.Receipt, error) {
	if err := errors.Join(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return protocol.Receipt{}, err
	}
	if p.Text == "" {
		return protocol.Receipt{}, protocol.InvalidParams("text", "required and non-empty")
	}
	if n, max := len(p.Text)+len(p.Attachments), d.cfg.Limits.MaxInputBytes; n > max {
		return protocol.Receipt{}, protocol.InvalidParams("text", "input is %d bytes; the limit is %d (limits.max_input_bytes)", n, max)
	}
	att, err := canonicalAttachments(p.Attachments)
	if err != nil {
		return protocol.Receipt{}, err
	}
	a, err := d.queue.Update(ctx, p.SessionID, p.AdmissionID, p.Text, att)
	if err != nil {
		return protocol.Receipt{}, err
	}
	r := receiptToWire(a.Receipt())
	r.Text = a.Text
	return r, nil
}

func (d *Daemon) promptMove(ctx context.Context, c *rpc.Conn, p protocol.MoveParams) (protocol.MoveResult, error) {
	if err := errors.Join(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return protocol.MoveResult{}, err
	}
	if p.Before == p.AdmissionID {
		return protocol.MoveResult{}, protocol.InvalidParams("before", "must name another admission than admission_id")
	}
	order, err := d.queue.Move(ctx, p.SessionID, p.AdmissionID, p.Before)
	if err != nil {
		return protocol.MoveResult{}, err
	}
	if order == nil {
		order = []string{}
	}
	return protocol.MoveResult{Order: order}, nil
}

func (d *Daemon) sessionFork(ctx context.Context, c *rpc.Conn, p protocol.ForkParams) (protocol.ForkResult, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.ForkResult{}, err
	}
	if identOf(c).SessionID != "" {
		// A new session is beyond the reach of a client paired for one.
		return protocol.ForkResult{}, protocol.Errorf(protocol.ReasonForbidden,
			"a client paired for one session cannot create another (session.fork)")
	}
	if d.draining.Load() {
		return protocol.ForkResult{}, protocol.Errorf(protocol.ReasonDraining, "the daemon is stopping and creates no sessions")
	}
	id, err := d.queue.Fork(ctx, admission.ForkRequest{SessionID: p.SessionID, Through: p.ThroughAdmissionID, Label: d.cfg.Cluster.Label})
	if err != nil {
		return protocol.ForkResult{}, err
	}
	d.audit().Info("session forked", append(connAttrs(c), "session_id", id, "source_session_id", p.SessionID, "through_admission_id", p.ThroughAdmissionID)...)
	return protocol.ForkResult{SessionID: id}, nil
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

func (d *Daemon) promptCancel(ctx context.Context, c *rpc.Conn, p protocol.AdmissionRef) (protocol.Receipt, error) {
	if err := errors.Join(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return protocol.Receipt{}, err
	}
	a, err := d.queue.Cancel(ctx, p.SessionID, p.AdmissionID)
	if err != nil {
		return protocol.Receipt{}, err
	}
	return receiptToWire(a.Receipt()), nil
}

func (d *Daemon) sessionInterrupt(ctx context.Context, c *rpc.Conn, p protocol.InterruptParams) (protocol.InterruptResult, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.InterruptResult{}, err
	}
	s, err := getSession(d.db.Reads(ctx), p.SessionID)
	if err != nil {
		return protocol.InterruptResult{}, err
	}
	if p.ExecutionGeneration != nil && *p.ExecutionGeneration != s.ExecutionGeneration {
		return protocol.InterruptResult{}, protocol.Errorf(protocol.ReasonStaleGeneration, "execution_generation %d is not the live one (%d)",
			*p.ExecutionGeneration, s.ExecutionGeneration).With("execution_generation", s.ExecutionGeneration)
	}
	var gen int64
	if p.ExecutionGeneration != nil {
		gen = *p.ExecutionGeneration
	}
	a, ok, err := d.sched.Interrupt(ctx, p.SessionID, gen)
	if err != nil {
		return protocol.InterruptResult{}, err
	}
	if !ok {
		// Not running here: it may run on another daemon of the cluster.
		return d.interruptElsewhere(ctx, p.SessionID, gen)
	}
	id := a.AdmissionID
	return protocol.InterruptResult{Interrupted: &id}, nil
}

func (d *Daemon) resolveUnknown(ctx context.Context, c *rpc.Conn, p protocol.ResolveUnknownParams) (protocol.Receipt, error) {
	if err := errors.Join(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return protocol.Receipt{}, err
	}
	if p.ExecutionGeneration == nil {
		return protocol.Receipt{}, protocol.InvalidParams("execution_generation", "required: the generation of the unknown admission")
	}
	a, err := d.queue.ResolveUnknownBy(ctx, p.SessionID, p.AdmissionID, *p.ExecutionGeneration, senderJSON(c), d.closePrompts)
	if err != nil {
		return protocol.Receipt{}, err
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

func (d *Daemon) respond(kind string) func(context.Context, *rpc.Conn, protocol.RespondParams) (protocol.RespondResult, error) {
	return func(ctx context.Context, c *rpc.Conn, p protocol.RespondParams) (protocol.RespondResult, error) {
		if err := errors.Join(required("session_id", p.SessionID), required("prompt_id", p.PromptID)); err != nil {
			return protocol.RespondResult{}, err
		}
		if p.ExecutionGeneration == nil {
			return protocol.RespondResult{}, protocol.InvalidParams("execution_generation", "required: the prompt's execution_generation")
		}
		var answer json.RawMessage
		switch kind {
		case prompts.KindApproval:
			if !prompts.ValidChoice(string(p.Choice)) {
				return protocol.RespondResult{}, protocol.InvalidParams("choice", "must be once, session, always or deny")
			}
			// "always" writes the daemon-wide allowlist: beyond a
			// session-scoped client's reach, like approvals.revoke of one.
			if string(p.Choice) == prompts.ChoiceAlways && identOf(c).SessionID != "" {
				return protocol.RespondResult{}, protocol.Errorf(protocol.ReasonForbidden,
					"a client paired for one session cannot remember an approval for every session (choice always): answer once, session or deny")
			}
			answer, _ = json.Marshal(protocol.ApprovalResponse{Choice: p.Choice})
		default:
			// A null answer is no answer: it would resolve the prompt
			// with an empty reply the user never gave.
			if len(p.Answer) == 0 || string(p.Answer) == "null" {
				return protocol.RespondResult{}, protocol.InvalidParams("answer", "required: a string or a list of strings")
			}
			a, ok := clarifyAnswer(p.Answer)
			if !ok {
				return protocol.RespondResult{}, protocol.InvalidParams("answer", "must be a string or a list of strings")
			}
			answer, _ = json.Marshal(protocol.ClarifyResponse{Answer: a})
		}
		status, err := d.prompts.Respond(ctx, prompts.Response{SessionID: p.SessionID, PromptID: p.PromptID,
			Kind: kind, Generation: *p.ExecutionGeneration, Answer: answer, AnsweredBy: answeredBy(c)})
		if err != nil {
			return protocol.RespondResult{}, err
		}
		d.auditAnswer(c, p, kind, status, answer)
		return protocol.RespondResult{Status: protocol.RespondStatus(status), PromptID: p.PromptID}, nil
	}
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

func (d *Daemon) approvalsList(ctx context.Context, c *rpc.Conn, p protocol.ApprovalsListParams) (protocol.ApprovalsList, error) {
	always, err := d.prompts.AlwaysAllowed(ctx)
	if err != nil {
		return protocol.ApprovalsList{}, err
	}
	out := protocol.ApprovalsList{Always: make([]protocol.AllowRule, 0, len(always))}
	for _, r := range always {
		out.Always = append(out.Always, protocol.AllowRule{Pattern: r.Pattern, CreatedAt: r.CreatedAt})
	}
	if p.SessionID != "" {
		if _, err := getSession(d.db.Reads(ctx), p.SessionID); err != nil {
			return protocol.ApprovalsList{}, err
		}
		rs, err := d.prompts.SessionAllowed(ctx, p.SessionID)
		if err != nil {
			return protocol.ApprovalsList{}, err
		}
		out.Session = make([]protocol.AllowRule, 0, len(rs))
		for _, r := range rs {
			out.Session = append(out.Session, protocol.AllowRule{Pattern: r.Pattern, CreatedAt: r.CreatedAt})
		}
	}
	return out, nil
}
