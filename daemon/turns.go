package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/agent"
	"github.com/sessiond/sessiond/model"
	"github.com/sessiond/sessiond/prompts"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/transcript"
)

// executor runs admitted turns through the agent: the only executor the
// daemon ships.
type executor struct {
	d      *Daemon
	runner *agent.Runner

	mu     sync.Mutex
	models map[string]*model.Client // by base URL
}

func (d *Daemon) newExecutor() (admission.Executor, error) {
	e := &executor{d: d, models: map[string]*model.Client{}}
	d.prestarts = tools.NewPrestarts(0, 0)
	e.runner = &agent.Runner{
		Config: agent.Config{
			ApprovalMode:    d.cfg.Approvals.Mode,
			ApprovalTimeout: time.Duration(d.cfg.Approvals.Timeout) * time.Second,
			ClarifyTimeout:  time.Duration(d.cfg.Agent.ClarifyTimeout) * time.Second,
			MaxIterations:   d.cfg.Agent.MaxIterations,
			TerminalTimeout: time.Duration(d.cfg.Terminal.Timeout) * time.Second,
			MaxTimeout:      time.Duration(d.cfg.Terminal.MaxTimeout) * time.Second,
			OutputLimit:     d.cfg.Terminal.OutputLimit,
			EnvExclude:      d.cfg.Terminal.EnvExclude,
			EnvPassthrough:  d.cfg.Terminal.EnvPassthrough,
			ProtectedPaths:  []string{d.home},
			UserHome:        os.Getenv("HOME"), // what terminal commands inherit
			MCPCallTimeout:  time.Duration(d.cfg.MCP.CallTimeout) * time.Second,
			Prestarts:       d.prestarts,
		},
		Journal:  &journal{d: d},
		Prompter: prompter{d},
		NewModel: e.model,
		Logger:   d.log,
		Steering: &journal{d: d},
	}
	return e, nil
}

func (e *executor) model(s agent.Session) agent.Model {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.models[s.BaseURL]; ok {
		return c
	}
	c := model.New(model.Config{BaseURL: s.BaseURL, APIKey: e.d.cfg.Model.APIKey,
		ConnectTimeout: time.Duration(e.d.cfg.Model.ConnectTimeout) * time.Second,
		IdleTimeout:    time.Duration(e.d.cfg.Model.IdleTimeout) * time.Second,
		WrapTransport:  e.d.wrapModelTransport})
	e.models[s.BaseURL] = c
	return c
}

// Run implements admission.Executor.
func (e *executor) Run(ctx context.Context, t admission.Turn) admission.Result {
	s, err := getSession(e.d.db.Reads(ctx), t.Admission.SessionID)
	if err != nil {
		return admission.Result{Outcome: admission.OutcomeFailed, Error: fmt.Sprintf("load session: %v", err)}
	}
	x := t.Admission.Execution()
	turn := agent.Turn{SessionID: x.SessionID, AdmissionID: x.AdmissionID, Generation: x.Generation, LeaseEpoch: x.LeaseEpoch}
	as := agent.Session{ID: s.SessionID, Cwd: s.Cwd, Model: s.Model, BaseURL: s.BaseURL, Toolsets: s.ToolsetNames(),
		ApprovalMode: e.d.approvalMode(s)}
	if pol := e.d.policy(s); pol.Mode != sandbox.ModeOff {
		as.Sandbox = tools.SandboxSpec(pol, e.d.home, e.d.hiddenFiles, e.d.storeSockets...)
		if e.d.sandboxErr != nil {
			as.SandboxUnavailable = e.d.sandboxErr.Error()
		}
	}
	// The session's MCP servers start with its first turn here and stop
	// after mcp.idle_timeout without one.
	if set := e.d.mcp.acquire(s, as.Sandbox); set != nil {
		defer set.Release()
		as.MCP = set
	}
	res := e.runner.Run(ctx, as, turn)
	out := admission.Result{Outcome: admission.OutcomeFailed, Error: res.Error}
	if res.Outcome == "completed" {
		out = admission.Result{Outcome: admission.OutcomeCompleted}
	}
	if res.Reply != nil {
		// The final answer is written by the settle transaction (fenced by
		// its guarded update), one commit fewer per turn.
		reply := *res.Reply
		out.Finish = func(tx *store.Tx) error { return appendAssistant(tx, turn, reply, nil) }
	}
	return out
}

// prompter is the agent's Prompter: the daemon's prompts manager, reached
// at each call because the manager is built after the scheduler whose live
// check it takes (no turn runs before both exist).
type prompter struct{ d *Daemon }

func (p prompter) Ask(ctx context.Context, a prompts.Ask) (prompts.Outcome, error) {
	return p.d.prompts.Ask(ctx, a)
}

func (p prompter) Allowed(ctx context.Context, sessionID, pattern string) (bool, error) {
	return p.d.prompts.Allowed(ctx, sessionID, pattern)
}

func (p prompter) AllowedInSession(ctx context.Context, sessionID, pattern string) (bool, error) {
	return p.d.prompts.AllowedInSession(ctx, sessionID, pattern)
}

// journal implements agent.Journal on the store; every write is fenced by
// the turn's admission.Execution.
type journal struct{ d *Daemon }

// fence checks the turn's execution in tx (admission.Execution.Check,
// which takes the session row's lock first).
func (j *journal) fence(tx *store.Tx, t agent.Turn) error {
	x := admission.Execution{SessionID: t.SessionID, AdmissionID: t.AdmissionID, Generation: t.Generation, Daemon: j.d.epoch, LeaseEpoch: t.LeaseEpoch}
	if err := x.Check(tx); err != nil {
		if errors.Is(err, admission.ErrFenced) {
			return fmt.Errorf("%w: %w", agent.ErrNotLive, err)
		}
		return err
	}
	return nil
}

func (j *journal) Transcript(ctx context.Context, t agent.Turn) ([]agent.Stored, error) {
	ms, err := store.Transcript(j.d.db.Reads(ctx), t.SessionID)
	if err != nil {
		return nil, err
	}
	out := make([]agent.Stored, 0, len(ms))
	for _, m := range ms {
		st := agent.Stored{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID.String}
		calls, err := m.Calls()
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			st.ToolCalls = append(st.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out = append(out, st)
	}
	return out, nil
}

func (j *journal) AssistantMessage(ctx context.Context, t agent.Turn, content string, calls []model.ToolCall) error {
	return j.d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("message.assistant")
		if err := j.fence(tx, t); err != nil {
			return err
		}
		return appendAssistant(tx, t, content, calls)
	})
}

// appendAssistant appends an assistant message of turn t and its
// message.completed event in tx; the caller fences tx.
func appendAssistant(tx *store.Tx, t agent.Turn, content string, calls []model.ToolCall) error {
	var sc []store.ToolCall
	for _, c := range calls {
		sc = append(sc, store.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	m, err := tx.AppendMessage(t.SessionID, t.AdmissionID, transcript.RoleAssistant, content, sc, "", "")
	if err != nil {
		return err
	}
	_, err = tx.AppendEvent(t.SessionID, protocol.EventMessageCompleted, t.AdmissionID, t.Generation,
		protocol.MessageCompletedPayload{Message: messageWire(m)})
	return err
}

func (j *journal) ToolStarted(ctx context.Context, t agent.Turn, ev agent.ToolEvent) error {
	return j.d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("tool.started")
		if err := j.fence(tx, t); err != nil {
			return err
		}
		_, err := tx.AppendEvent(t.SessionID, protocol.EventToolStarted, t.AdmissionID, t.Generation,
			protocol.ToolStartedPayload{ToolCallID: ev.CallID, Name: ev.Name, Args: ev.Args})
		return err
	})
}

// ToolRunning appends tool.running {tool_call_id, pid, boot_id,
// start_ticks, session, marker}: the command's process group and its
// identity (tools.ProcessIdentity), read at boot after a crash
// (killLeftoverTools) and when the turn is closed (admission closes it with transcript.Close, which words
// the result "was running", not "not run").
func (j *journal) ToolRunning(ctx context.Context, t agent.Turn, ev agent.ToolEvent, proc tools.ProcessIdentity) error {
	return j.d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("tool.running")
		if err := j.fence(tx, t); err != nil {
			return err
		}
		_, err := tx.AppendEvent(t.SessionID, protocol.EventToolRunning, t.AdmissionID, t.Generation,
			protocol.ToolRunningPayload{MCPServer: ev.MCPServer, ToolCallID: ev.CallID, PID: proc.PID, BootID: proc.BootID, StartTicks: proc.StartTicks,
				Session: proc.Session, Marker: proc.Marker})
		return err
	})
}

func (j *journal) ToolCompleted(ctx context.Context, t agent.Turn, ev agent.ToolEvent) error {
	return j.d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("tool.completed")
		if err := j.fence(tx, t); err != nil {
			return err
		}
		if _, err := tx.AppendMessage(t.SessionID, t.AdmissionID, transcript.RoleTool, ev.Result, nil, ev.CallID, ""); err != nil {
			return err
		}
		payload := protocol.ToolCompletedPayload{ToolCallID: ev.CallID, Name: ev.Name, OK: ev.OK,
			ExitCode: ev.ExitCode, Result: protocol.ToolResult(ev.Result)}
		_, err := tx.AppendEvent(t.SessionID, protocol.EventToolCompleted, t.AdmissionID, t.Generation, payload)
		return err
	})
}

// Take implements agent.Steering: a read first (nothing is written while
// nobody steers), then one fenced transaction that takes the session's
// queued steers into the turn and appends their user messages
// (admission.TakeSteers) and the message.completed events.
func (j *journal) Take(ctx context.Context, t agent.Turn) ([]agent.Stored, error) {
	waiting, err := admission.SteersWaiting(j.d.db.Reads(ctx), t.SessionID)
	if err != nil || !waiting {
		return nil, err
	}
	var out []agent.Stored
	err = j.d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("take_steers")
		out = nil
		if err := j.fence(tx, t); err != nil {
			return err
		}
		x := admission.Execution{SessionID: t.SessionID, AdmissionID: t.AdmissionID, Generation: t.Generation, Daemon: j.d.epoch, LeaseEpoch: t.LeaseEpoch}
		_, msgs, err := admission.TakeSteers(tx, x)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if _, err := tx.AppendEvent(t.SessionID, protocol.EventMessageCompleted, m.AdmissionID.String, t.Generation,
				protocol.MessageCompletedPayload{Message: messageWire(m)}); err != nil {
				return err
			}
			out = append(out, agent.Stored{Role: m.Role, Content: m.Content})
		}
		return nil
	})
	if len(out) > 0 {
		j.d.log.Info("steered input taken into the running turn", "session_id", t.SessionID, "admission_id", t.AdmissionID, "steers", len(out))
	}
	return out, err
}

func (j *journal) Delta(t agent.Turn, typ protocol.EventType, payload any) {
	j.d.hub.publishDelta(t.SessionID, typ, t.AdmissionID, t.Generation, payload)
}

// messageWire is a stored message's wire shape, in events and snapshots.
func messageWire(m store.Message) protocol.Message {
	w := protocol.Message{ID: m.ID, Role: protocol.Role(m.Role), Content: m.Content, AdmissionID: m.AdmissionID.String,
		ToolCallID: m.ToolCallID.String, Kind: m.Kind.String, CreatedAt: m.CreatedAt}
	if m.ToolCalls.Valid {
		w.ToolCalls = json.RawMessage(m.ToolCalls.String)
	}
	if m.Sender.Valid {
		w.Sender = protocol.DecodeSender([]byte(m.Sender.String))
	}
	return w
}

type leftoverRow = admission.ToolEvent

// killLeftoverTools is a boot step after Recover: a command that was
// running when an earlier daemon died (a tool.running event of an unknown
// admission) may still run, orphaned. Its process group is killed if its
// leader is still the very process recorded, or its members still carry the
// command's marker (tools.KillGroupIfSame), so a reused pid is never hit.
// The model is told when the turn is resolved (admission.CrashedWhileRunning).
func (d *Daemon) killLeftoverTools(ctx context.Context) error {
	// A call with a tool.completed ended while its daemon lived, which
	// killed its group then: whatever uses that group id now is not it.
	rows, err := admission.LeftoverToolEvents(ctx, d.db)
	if err != nil {
		return err
	}
	completed := map[[2]string]bool{}
	var running []protocol.ToolRunningPayload
	var runningRows []leftoverRow
	for _, r := range rows {
		pl, err := protocol.DecodeEvent(protocol.EventType(r.Type), json.RawMessage(r.Payload))
		if err != nil {
			d.log.Error("leftover tools: undecodable event", "session_id", r.SessionID, "admission_id", r.AdmissionID, "err", err)
			continue
		}
		switch p := pl.(type) {
		case protocol.ToolCompletedPayload:
			completed[[2]string{r.AdmissionID, p.ToolCallID}] = true
		case protocol.ToolRunningPayload:
			running, runningRows = append(running, p), append(runningRows, r)
		}
	}
	for i, p := range running {
		r := runningRows[i]
		if completed[[2]string{r.AdmissionID, p.ToolCallID}] || p.BootID == "" {
			continue
		}
		killed, err := tools.KillGroupIfSame(tools.ProcessIdentity{PID: p.PID, BootID: p.BootID, StartTicks: p.StartTicks,
			Session: p.Session, Marker: p.Marker})
		switch {
		case err != nil:
			d.log.Error("cannot kill a command left running by an earlier daemon", "session_id", r.SessionID,
				"admission_id", r.AdmissionID, "tool_call_id", p.ToolCallID, "pid", p.PID, "err", err)
		case killed:
			d.log.Warn("killed a command left running by an earlier daemon", "session_id", r.SessionID,
				"admission_id", r.AdmissionID, "tool_call_id", p.ToolCallID, "pid", p.PID)
		}
	}
	return nil
}
