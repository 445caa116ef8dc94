package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// The session lifecycle verbs: rename, rm, show, approvals.

func (a *app) renameCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rename SESSION TITLE",
		Short: "Give a session a new title (session.update)",
		Long:  "Sets the session's title, as sessions and attach show it. The title must not be blank and is at most 500 bytes.",
		Example: `  sessionctl rename "$S" "fix the flaky test"
  sessionctl rename "$S" "release notes" --json`,
		Args: args(2, "SESSION TITLE"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if strings.TrimSpace(args[1]) == "" {
			return usageError("TITLE must not be blank")
		}
		var row protocol.SessionSummary
		if err := a.call(ctx, protocol.MethodSessionUpdate, protocol.SessionUpdateParams{SessionID: args[0], Title: &args[1]}, &row); err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(row)
		}
		fmt.Fprintf(a.stdout, "renamed %s: %s\n", row.SessionID, row.Title)
		return nil
	})
	return cmd
}

func (a *app) rmCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "rm SESSION",
		Short: "Delete a session and its transcript (session.delete)",
		Long: `Deletes the session with its transcript, prompts, events and "session"
approvals, in one transaction; the text is scrubbed from state.db. The daemon
refuses while a turn runs (sessionctl interrupt it first), while an input is
queued (sessionctl cancel it first: its sender waits for its outcome) and
while an input left unknown by a crash holds the session (sessionctl resolve
it first). rm shows the session and asks for confirmation on stdin, unless --yes.`,
		Example: `  sessionctl rm "$S"          # shows it, asks y/N
  sessionctl rm "$S" --yes    # for scripts`,
		Args: args(1, "SESSION"),
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		sessionID := args[0]
		c, _, err := a.connect(ctx, rpc.DialOptions{OnNotification: func(rpc.Notification) {}})
		if err != nil {
			return err
		}
		defer c.Close()
		if !yes {
			var snap protocol.Snapshot
			if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: sessionID}, &snap); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "session %s %q (cwd %s, created %s): %d message(s), %d pending input(s)\n",
				snap.SessionID, snap.Title, snap.Cwd, snap.CreatedAt, len(snap.Messages), len(snap.Pending))
			fmt.Fprint(a.stderr, "Delete it and its transcript? This cannot be undone. [y/N] ")
			line, _ := bufio.NewReader(a.stdin).ReadString('\n')
			if f, ok := a.stdin.(*os.File); !ok || !isTerminal(f) {
				fmt.Fprintln(a.stderr)
			}
			if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
				return fail(exitFailed, "not deleted (answer y to delete, or pass --yes)")
			}
		}
		var r protocol.SessionDeleteResult
		err = a.callOn(ctx, c, protocol.MethodSessionDelete, protocol.SessionDeleteParams{SessionID: sessionID}, &r)
		switch {
		case errors.Is(err, protocol.ErrSessionBusy):
			return fail(exitFailed, "session %s runs a turn or has queued inputs: not deleted; stop the turn with %s, withdraw the queued inputs (%s lists them) with %s", sessionID,
				a.cmdline("interrupt", sessionID), a.cmdline("pending", sessionID), a.cmdline("cancel", sessionID, "ADMISSION_ID"))
		case errors.Is(err, protocol.ErrUnknownExecution):
			return fail(exitFailed, "session %s is held by an input left unknown by a crash: not deleted; decide on it first (%s)", sessionID, a.cmdline("pending", sessionID))
		case err != nil:
			return err
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		fmt.Fprintf(a.stdout, "deleted %s\n", sessionID)
		return nil
	})
	return cmd
}

func (a *app) approvalsCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "approvals [ls | rm PATTERN]",
		Short: "List or revoke remembered approvals",
		Long: `An approval answered "always" is remembered for every session, one answered
"session" for that session only; commands of the same kind (the pattern, e.g.
rm-recursive) then run without asking. approvals (or approvals ls) lists them:
the "always" ones, and with --session that session's. approvals rm PATTERN
revokes one (the "always" one, or with --session the session's): commands of
that kind ask again.`,
		Example: `  sessionctl approvals
  sessionctl approvals ls --session "$S"
  sessionctl approvals rm rm-recursive
  sessionctl approvals rm git-push-force --session "$S"`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0, len(args) == 1 && args[0] == "ls":
				return nil
			case len(args) == 2 && args[0] == "rm":
				return nil
			case len(args) >= 1 && args[0] == "rm":
				return usageError("approvals rm needs PATTERN (got %d argument(s)); see sessionctl approvals --help", len(args)-1)
			}
			return usageError("approvals takes ls or rm PATTERN, not %q; see sessionctl approvals --help", strings.Join(args, " "))
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "also list (ls), or revoke (rm), this session's \"session\" approvals")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if len(args) == 2 {
			var r protocol.ApprovalsRevokeResult
			if err := a.call(ctx, protocol.MethodApprovalsRevoke, protocol.ApprovalsRevokeParams{Pattern: args[1], SessionID: sessionID}, &r); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(r)
			}
			if sessionID != "" {
				fmt.Fprintf(a.stdout, "revoked %s for session %s: such commands ask again\n", args[1], sessionID)
			} else {
				fmt.Fprintf(a.stdout, "revoked %s (always): such commands ask again\n", args[1])
			}
			return nil
		}
		var l protocol.ApprovalsList
		if err := a.call(ctx, protocol.MethodApprovalsList, protocol.ApprovalsListParams{SessionID: sessionID}, &l); err != nil {
			return err
		}
		if a.jsonOut {
			if l.Always == nil {
				l.Always = []protocol.AllowRule{}
			}
			if sessionID != "" && l.Session == nil {
				l.Session = []protocol.AllowRule{}
			}
			return a.printJSON(l)
		}
		if len(l.Always) == 0 && len(l.Session) == 0 {
			fmt.Fprintln(a.stdout, "no remembered approvals")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PATTERN\tSCOPE\tSINCE")
		for _, r := range l.Always {
			fmt.Fprintf(tw, "%s\talways\t%s\n", r.Pattern, r.CreatedAt)
		}
		for _, r := range l.Session {
			fmt.Fprintf(tw, "%s\tsession %s\t%s\n", r.Pattern, sessionID, r.CreatedAt)
		}
		return tw.Flush()
	})
	return cmd
}

// transcriptItem is one entry of show's transcript (and of show --json).
// Type is user, assistant, tool_call, boundary or turn.
type transcriptItem struct {
	Type        string `json:"type"`
	AdmissionID string `json:"admission_id,omitempty"`
	At          string `json:"at,omitempty"`
	Text        string `json:"text,omitempty"` // user, assistant, boundary
	// Sender is who submitted a user item (protocol.Sender).
	Sender *protocol.Sender `json:"sender,omitempty"`

	// tool_call
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
	Arguments  string          `json:"arguments,omitempty"`
	Approval   *approvalRecord `json:"approval,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"` // the tool message given to the model (JSON when it is)
	Synthetic  bool            `json:"synthetic,omitempty"`

	// turn
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
}

// approvalRecord is what happened to a tool call's approval prompt.
type approvalRecord struct {
	PromptID   string            `json:"prompt_id"`
	Risk       string            `json:"risk,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	Pattern    string            `json:"pattern,omitempty"`
	Resolution string            `json:"resolution,omitempty"` // answered, timed_out, interrupted, fenced; empty while open
	Choice     string            `json:"choice,omitempty"`
	AnsweredBy map[string]string `json:"answered_by,omitempty"` // {conn, client, id, label?, version?}
}

// transcriptView is show --json.
type transcriptView struct {
	SessionID string  `json:"session_id"`
	Title     string  `json:"title"`
	Cwd       string  `json:"cwd"`
	Model     string  `json:"model"`
	CreatedAt string  `json:"created_at"`
	Running   *string `json:"running"`
	// MCPServers are the session's MCP servers and their state on the
	// daemon (session.resume's mcp_servers).
	MCPServers []protocol.MCPServerStatus `json:"mcp_servers"`
	Items      []transcriptItem           `json:"items"`
	// EventsPruned: older events were pruned, so approvals and turn
	// outcomes are missing for the oldest turns (the messages are all here).
	EventsPruned bool `json:"events_pruned,omitempty"`
}

func (a *app) showCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show SESSION",
		Short: "Print a session's transcript, without a terminal",
		Long: `Prints the whole transcript of a session as plain text: the inputs, the
assistant's answers, each tool call with its output, the approval it needed
and who decided it (the client name and connection number the daemon
recorded), and how each turn ended; first, the session's MCP servers and
their state on the daemon. It needs no terminal (attach does), so it
works in scripts, pipes and over ssh. --json prints the same as one object
with an items list.`,
		Example: `  sessionctl show "$S"
  sessionctl show "$S" | less
  sessionctl show "$S" --json | jq '.items[] | select(.type == "tool_call") | .approval'`,
		Args: args(1, "SESSION"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		zero := int64(0)
		var snap protocol.Snapshot
		c, _, err := a.connect(ctx, rpc.DialOptions{OnNotification: func(rpc.Notification) {}})
		if err != nil {
			return err
		}
		defer c.Close()
		if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: args[0], AfterSeq: &zero}, &snap); err != nil {
			return err
		}
		v := buildTranscript(snap)
		if a.jsonOut {
			return a.printJSON(v)
		}
		a.printTranscript(v)
		return nil
	})
	return cmd
}

// buildTranscript joins the snapshot's messages (the transcript) with its
// events (approvals and who answered them, turn outcomes), in transcript
// order.
func buildTranscript(snap protocol.Snapshot) transcriptView {
	v := transcriptView{SessionID: snap.SessionID, Title: snap.Title, Cwd: snap.Cwd, Model: snap.Model,
		CreatedAt: snap.CreatedAt, Running: snap.Running, Items: []transcriptItem{}, EventsPruned: snap.SnapshotRequired,
		MCPServers: snap.MCPServers}
	if v.MCPServers == nil {
		v.MCPServers = []protocol.MCPServerStatus{}
	}
	approvals := approvalsFromEvents(snap.Events)
	type turnEnd struct{ outcome, err string }
	ends := map[string]turnEnd{}
	for _, e := range snap.Events {
		if pl, err := e.Decode(); err == nil {
			if p, ok := pl.(protocol.TurnCompletedPayload); ok {
				ends[e.AdmissionID] = turnEnd{string(p.Outcome), p.Error}
			}
		}
	}
	calls := map[string]int{} // tool_call_id -> index in Items
	endTurn := func(adm string) {
		if end, ok := ends[adm]; ok && adm != "" {
			v.Items = append(v.Items, transcriptItem{Type: "turn", AdmissionID: adm, Outcome: end.outcome, Error: end.err})
			delete(ends, adm)
		}
	}
	prev := ""
	for _, m := range snap.Messages {
		if m.AdmissionID != prev {
			endTurn(prev)
			prev = m.AdmissionID
		}
		switch m.Role {
		case protocol.RoleUser:
			v.Items = append(v.Items, transcriptItem{Type: "user", AdmissionID: m.AdmissionID, At: m.CreatedAt, Text: m.Content, Sender: m.Sender})
		case protocol.RoleAssistant:
			if m.Content != "" {
				v.Items = append(v.Items, transcriptItem{Type: "assistant", AdmissionID: m.AdmissionID, At: m.CreatedAt, Text: m.Content})
			}
			var tcs []toolCall
			json.Unmarshal(m.ToolCalls, &tcs)
			for _, tc := range tcs {
				calls[tc.ID] = len(v.Items)
				v.Items = append(v.Items, transcriptItem{Type: "tool_call", AdmissionID: m.AdmissionID, At: m.CreatedAt,
					ToolCallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Approval: approvals[tc.ID]})
			}
		case protocol.RoleTool:
			result := json.RawMessage(m.Content)
			if !json.Valid(result) {
				result, _ = json.Marshal(m.Content)
			}
			if i, ok := calls[m.ToolCallID]; ok {
				v.Items[i].Result, v.Items[i].Synthetic = result, m.Kind == "synthetic"
			}
		case protocol.RoleBoundary:
			v.Items = append(v.Items, transcriptItem{Type: "boundary", AdmissionID: m.AdmissionID, At: m.CreatedAt, Text: m.Content})
		}
	}
	endTurn(prev)
	return v
}

// printTranscript writes v as plain text (no colour, no terminal needed).
func (a *app) printTranscript(v transcriptView) {
	w := a.stdout
	title := v.Title
	if title == "" {
		title = "(untitled)"
	}
	fmt.Fprintf(w, "session %s  %s\n  cwd %s · model %s · created %s\n", v.SessionID, title, v.Cwd, v.Model, v.CreatedAt)
	for _, s := range v.MCPServers {
		fmt.Fprintln(w, "  "+mcpLine(style{}, s))
	}
	if v.EventsPruned {
		fmt.Fprintln(w, "  (older events were pruned: approvals and outcomes of the oldest turns are not shown)")
	}
	if len(v.Items) == 0 {
		fmt.Fprintln(w, "\n(no messages yet)")
	}
	for _, it := range v.Items {
		switch it.Type {
		case "user":
			fmt.Fprintf(w, "\n%s%s\n", userPrefix(it.Sender), it.Text)
			if it.Sender != nil && it.Sender.ID != protocol.SenderOwner {
				fmt.Fprintf(w, "  (sent by %s)\n", senderName(it.Sender))
			}
		case "assistant":
			fmt.Fprintf(w, "assistant › %s\n", it.Text)
		case "tool_call":
			fmt.Fprintf(w, "  %s\n", toolSummary(it.Name, json.RawMessage(it.Arguments)))
			if ap := it.Approval; ap != nil {
				fmt.Fprintf(w, "    %s\n", approvalLine(*ap))
			}
			if it.Result == nil {
				fmt.Fprintln(w, "    (no result yet)")
				continue
			}
			line, out := resultSummary(it.Name, true, nil, it.Result)
			for _, l := range strings.Split(strings.TrimRight(strings.ReplaceAll(out, "\r\n", "\n"), "\n"), "\n") {
				if out != "" {
					fmt.Fprintf(w, "    │ %s\n", l)
				}
			}
			if it.Synthetic {
				line += " (recorded by the daemon: the call did not run to its end)"
			}
			fmt.Fprintf(w, "    ↳ %s\n", line)
		case "boundary":
			fmt.Fprintln(w, "  ── the turn was cut off here ──")
		case "turn":
			s := "── turn " + it.Outcome
			if it.Error != "" && it.Error != it.Outcome {
				s += ": " + it.Error
			}
			fmt.Fprintln(w, s+" ──")
		}
	}
	if v.Running != nil {
		fmt.Fprintf(w, "\n(a turn is running: %s)\n", *v.Running)
	}
}

// approvalLine describes an approval decision: the choice and who made
// it, or what closed the prompt.
func approvalLine(ap approvalRecord) string {
	what := "approval"
	if ap.Risk != "" {
		what += " (" + ap.Risk
		if ap.Reason != "" {
			what += ": " + ap.Reason
		}
		what += ")"
	}
	switch ap.Resolution {
	case "":
		return what + ": waiting for an answer"
	case string(protocol.ResolutionAnswered):
		s := what + ": " + ap.Choice
		if by := ap.AnsweredBy; by != nil {
			s += " by " + by["client"]
			if by["id"] != "" && by["id"] != protocol.SenderOwner {
				s += " for " + by["label"] + " (" + by["id"] + ")"
			}
			if by["conn"] != "" {
				s += " (connection " + by["conn"] + ")"
			}
		}
		return s
	case string(protocol.ResolutionTimedOut):
		return what + ": no answer in time (denied)"
	default:
		return what + ": closed, " + ap.Resolution
	}
}

// answeredBy is prompt.closed's answered_by as show --json prints it:
// {conn, client, id, label?, version?}; nil when nobody answered.
func answeredBy(a *protocol.AnsweredBy) map[string]string {
	if a == nil {
		return nil
	}
	m := map[string]string{"conn": a.Conn, "client": a.Client, "id": a.ID}
	if a.Label != "" {
		m["label"] = a.Label
	}
	if a.Version != "" {
		m["version"] = a.Version
	}
	return m
}

// approvalsFromEvents gathers the approval prompts of events (prompt.opened
// and prompt.closed) by the tool call they gated: what was decided and who
// decided it.
func approvalsFromEvents(events []protocol.Event) map[string]*approvalRecord {
	approvals := map[string]*approvalRecord{} // by tool_call_id
	byPrompt := map[string]*approvalRecord{}  // by prompt_id
	for _, e := range events {
		pl, err := e.Decode()
		if err != nil {
			continue
		}
		switch p := pl.(type) {
		case protocol.PromptOpenedPayload:
			if p.Prompt.Kind != protocol.KindApproval {
				continue
			}
			ap := approvalOf(p.Prompt)
			r := &approvalRecord{PromptID: p.Prompt.PromptID, Risk: string(ap.Risk), Reason: ap.Reason, Pattern: ap.Pattern}
			approvals[ap.ToolCallID], byPrompt[r.PromptID] = r, r
		case protocol.PromptClosedPayload:
			if r := byPrompt[p.PromptID]; r != nil {
				r.Resolution, r.Choice, r.AnsweredBy = string(p.Resolution), string(p.Choice()), answeredBy(p.AnsweredBy)
			}
		}
	}
	return approvals
}
