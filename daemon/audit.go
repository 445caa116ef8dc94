package daemon

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// The audit log: one INFO line per state change an operator may have to
// account for later (docs/operations.md lists them). Lines carry
// "audit=true" so that they can be filtered from the rest, session_id and
// admission_id where they apply, and, for what a client asked, the
// connection ("conn", a number unique in this process, the same on every
// line of that connection) and the client name given in initialize
// ("client"). Secrets (the token, API keys, model request bodies) are never
// logged.

// connSeq numbers the connections of this process.
var connSeq atomic.Int64

// Values of a connection (rpc.Conn.SetValue keys).
const (
	connIDKey  = "conn_id"
	clientKey  = "client"
	unnamedCli = "(no initialize)"
)

// audit is the logger of the audit lines.
func (d *Daemon) audit() *slog.Logger { return d.log.With("audit", true) }

// numberConn gives c its audit number; serveRPC calls it once per admitted
// connection.
func numberConn(c *rpc.Conn) int64 {
	id := connSeq.Add(1)
	c.SetValue(connIDKey, id)
	return id
}

// connAttrs are the attributes naming who asked: the connection number
// and the client name from initialize ("(no initialize)" when the client
// skipped it). A nil c (the daemon itself) is "conn=daemon".
func connAttrs(c *rpc.Conn) []any {
	if c == nil {
		return []any{"conn", "daemon"}
	}
	conn := "?"
	if v, ok := c.Value(connIDKey); ok {
		conn = strconv.FormatInt(v.(int64), 10)
	}
	client := unnamedCli
	if v, ok := c.Value(clientKey); ok {
		if ci, ok := v.(protocol.ClientInfo); ok && ci.Name != "" {
			client = ci.Name
			if ci.Version != "" {
				client += "/" + ci.Version
			}
		}
	}
	if id := identOf(c); id.ClientID != "" {
		return []any{"conn", conn, "client", client, "paired_client", id.ClientID}
	}
	return []any{"conn", conn, "client", client}
}

// answeredBy is the answered_by object of a prompt.closed event:
// {conn, client, id, label?, version?}: the connection and client name as
// before, plus the sender (pair.go): id "owner" or the paired client_id,
// its label, and the client version.
func answeredBy(c *rpc.Conn) *protocol.AnsweredBy {
	a := connAttrs(c)
	by := &protocol.AnsweredBy{}
	for i := 0; i+1 < len(a); i += 2 {
		switch a[i] {
		case "conn":
			by.Conn, _ = a[i+1].(string)
		case "client":
			by.Client, _ = a[i+1].(string)
		}
	}
	// paired_client is said by ID below.
	s := sender(c)
	by.ID, by.Label, by.Version = s.ID, s.Label, s.Version
	return by
}

// auditAnswer logs an answer to a prompt: the choice of an approval (an
// answer to a clarification is the user's text, logged by its length
// only), and whether it was the first.
func (d *Daemon) auditAnswer(c *rpc.Conn, p protocol.RespondParams, kind, status string, answer []byte) {
	attrs := append(connAttrs(c), "session_id", p.SessionID, "prompt_id", p.PromptID, "kind", kind,
		"execution_generation", *p.ExecutionGeneration, "status", status)
	if kind == string(protocol.KindApproval) {
		attrs = append(attrs, "choice", p.Choice)
	} else {
		attrs = append(attrs, "answer_bytes", len(answer))
	}
	d.audit().Info("prompt answered", attrs...)
}

// observeEvent is the store's event sink: every committed durable event is
// counted (metrics), audited when it is a transition an operator may have
// to account for, then published to subscribers.
func (d *Daemon) observeEvent(e store.Event) {
	// Decoded once for the metrics and the audit (this runs on the store's
	// committer goroutine, between group commits). An event whose payload
	// does not decode is logged as an error, neither counted nor audited
	// (the daemon wrote it: that is a bug).
	if pl, err := protocol.DecodeEvent(protocol.EventType(e.Type), e.Payload); err != nil {
		d.log.Error("audit: undecodable event", "session_id", e.SessionID, "seq", e.Seq, "err", err)
	} else {
		d.metrics.observe(e, pl)
		d.auditEvent(e, pl)
	}
	d.hub.publish(e)
}

// auditEvent writes the audit line of a committed event e, if it has one;
// pl is its decoded payload (protocol.DecodeEvent).
func (d *Daemon) auditEvent(e store.Event, pl any) {
	adm := ""
	if e.AdmissionID != nil {
		adm = *e.AdmissionID
	}
	base := []any{"session_id", e.SessionID, "admission_id", adm}
	if e.ExecutionGeneration != nil {
		base = append(base, "execution_generation", *e.ExecutionGeneration)
	}
	switch p := pl.(type) {
	case protocol.Receipt:
		switch {
		case p.Status == protocol.StatusQueued:
			d.audit().Info("admission admitted", append(base, "input_id", p.InputID, "seq", p.Seq)...)
		case p.Status == protocol.StatusTerminal && p.Outcome != nil && *p.Outcome == protocol.OutcomeCancelled:
			d.audit().Info("admission cancelled", append(base, "input_id", p.InputID)...)
		}
	case protocol.TurnStartedPayload:
		d.audit().Info("admission started", base...)
	case protocol.TurnCompletedPayload:
		attrs := append(base, "outcome", string(p.Outcome))
		if p.Error != "" {
			attrs = append(attrs, "error", p.Error)
		}
		d.audit().Info("admission settled", attrs...)
	case protocol.ToolStartedPayload:
		if p.Name != protocol.ToolTerminal {
			return
		}
		var cwd string
		if s, err := store.GetSession(d.db.Reads(context.Background()), e.SessionID); err == nil {
			cwd = s.Cwd
		}
		d.audit().Info("tool command started", append(base, "tool_call_id", p.ToolCallID, "command", p.Command(), "cwd", cwd)...)
	case protocol.ToolCompletedPayload:
		o, ok := toolResult(p)
		if !ok {
			return
		}
		attrs := append(base, "tool_call_id", p.ToolCallID, "result", o.result)
		if o.exitCode != nil {
			attrs = append(attrs, "exit_code", *o.exitCode)
		}
		attrs = append(attrs, "duration_ms", o.durationMS, "bytes", o.totalBytes)
		if o.err != "" {
			attrs = append(attrs, "error", o.err)
		}
		d.audit().Info("tool command ended", attrs...)
	case protocol.PromptOpenedPayload:
		attrs := append(base, "prompt_id", p.Prompt.PromptID, "kind", p.Prompt.Kind)
		if p.Prompt.Kind == protocol.KindApproval {
			a, _ := p.Prompt.Approval()
			attrs = append(attrs, "command", a.Command, "risk", string(a.Risk), "pattern", a.Pattern)
		}
		d.audit().Info("prompt opened", attrs...)
	case protocol.PromptClosedPayload:
		if p.Resolution != protocol.ResolutionAnswered { // answers are logged by the handler, with who answered
			d.audit().Info("prompt closed", append(base, "prompt_id", p.PromptID, "resolution", string(p.Resolution))...)
		}
	}
}
