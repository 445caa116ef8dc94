package daemon

import (
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/sessiond/sessiond/rpc"
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
		if ci, ok := v.(rpc.ClientInfo); ok && ci.Name != "" {
			client = ci.Name
			if ci.Version != "" {
				client += "/" + ci.Version
			}
		}
	}
	return []any{"conn", conn, "client", client}
}

// answeredBy is the answered_by object of a prompt.closed event:
// {conn, client}.
func answeredBy(c *rpc.Conn) map[string]string {
	a := connAttrs(c)
	by := map[string]string{}
	for i := 0; i+1 < len(a); i += 2 {
		by[a[i].(string)] = a[i+1].(string)
	}
	return by
}

// auditAnswer logs an answer to a prompt: the choice of an approval (an
// answer to a clarification is the user's text, logged by its length
// only), and whether it was the first.
func (d *Daemon) auditAnswer(c *rpc.Conn, p rpc.RespondParams, kind, status string, answer []byte) {
	attrs := append(connAttrs(c), "session_id", p.SessionID, "prompt_id", p.PromptID, "kind", kind,
		"execution_generation", *p.ExecutionGeneration, "status", status)
	if kind == "approval" {
		attrs = append(attrs, "choice", p.Choice)
	} else {
		attrs = append(attrs, "answer_bytes", len(answer))
	}
	d.audit().Info("prompt answered", attrs...)
}
