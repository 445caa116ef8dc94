package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

func (a *app) statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's info",
		Long: `Connects to the daemon of the home and prints daemon.info: version, pid, URL,
boot epoch, sessions and running turns; the prompts waiting for an answer; and
each session held by an input left unknown by a crash, with the resolve
command line that decides on it, ready to paste.`,
		Example: `  sessionctl status
  sessionctl --home /srv/sessiond status --json
  sessionctl status >/dev/null && echo "daemon is up"`,
		Args: args(0, "no arguments"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		// A held session is looked up with session.resume, which
		// subscribes the connection: drop the events.
		c, d, err := a.connect(ctx, rpc.DialOptions{OnNotification: func(rpc.Notification) {}})
		if err != nil {
			return err
		}
		defer c.Close()
		var info protocol.DaemonInfo
		if err := a.callOn(ctx, c, protocol.MethodDaemonInfo, nil, &info); err != nil {
			return err
		}
		held := []heldSession{}
		if info.HeldSessions > 0 {
			if held, err = a.heldSessions(ctx, c); err != nil {
				return err
			}
		}
		if a.jsonOut {
			return a.printJSON(struct {
				protocol.DaemonInfo
				URL  string        `json:"url"`
				Held []heldSession `json:"held"`
			}{info, d.URL, held})
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "daemon\tsessiond %s (protocol %d)\n", info.Version, info.Protocol)
		fmt.Fprintf(tw, "pid\t%d\n", info.PID)
		fmt.Fprintf(tw, "url\t%s\n", d.URL)
		fmt.Fprintf(tw, "home\t%s\n", info.Home)
		fmt.Fprintf(tw, "started\t%s (boot epoch %d)\n", info.StartedAt, info.BootEpoch)
		fmt.Fprintf(tw, "sessions\t%d\n", info.Sessions)
		fmt.Fprintf(tw, "running turns\t%d\n", info.RunningTurns)
		if info.OpenPrompts > 0 {
			fmt.Fprintf(tw, "waiting for you\t%d prompt(s): see %s, then %s\n", info.OpenPrompts, a.cmdline("sessions"), a.cmdline("pending", "SESSION"))
		}
		if info.HeldSessions > 0 {
			fmt.Fprintf(tw, "held\t%d session(s) behind an input left unknown by a crash; decide on each:\n", info.HeldSessions)
			for _, h := range held {
				fmt.Fprintf(tw, "\t  %s\n", h.Resolve)
			}
		}
		if info.Storage.Driver != "" {
			fmt.Fprintf(tw, "store\t%s %s\n", info.Storage.Driver, info.Storage.Database)
		}
		switch {
		case info.Storage.CheckpointError != "" && info.Storage.Driver == "postgres":
			fmt.Fprintf(tw, "storage\tWARNING: %s (the database refuses writes)\n", info.Storage.CheckpointError)
		case info.Storage.CheckpointError != "":
			fmt.Fprintf(tw, "storage\tWARNING: %s (state.db-wal is %d bytes and grows until state.db is writable)\n", info.Storage.CheckpointError, info.Storage.WALBytes)
		}
		return tw.Flush()
	})
	return cmd
}

func (a *app) sessionsCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "sessions",
		Aliases: []string{"ls"},
		Short:   "List the sessions",
		Long: `Prints a table of sessions, newest first: id, title, state, pending inputs
(not yet terminal: queued, running or unknown), cwd and creation time. The state is held (unknown) (an input was left
unknown by a daemon crash and holds the queue until sessionctl resolve),
waiting for you (a turn waits on an approval or a question: see sessionctl
pending), running (a turn runs), queued (inputs wait, e.g. for capacity)
or idle.`,
		Example: `  sessionctl sessions
  sessionctl sessions --limit 5
  sessionctl sessions --json | jq -r '.sessions[].session_id'`,
		Args: args(0, "no arguments"),
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most this many sessions (0: all)")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if limit < 0 {
			return usageError("--limit must be >= 0")
		}
		// The reason of a queued session is looked up with session.resume,
		// which subscribes the connection: drop the events.
		c, _, err := a.connect(ctx, rpc.DialOptions{OnNotification: func(rpc.Notification) {}})
		if err != nil {
			return err
		}
		defer c.Close()
		all := protocol.SessionList{Sessions: []protocol.SessionSummary{}}
		cursor := ""
		for {
			page := 500
			if limit > 0 {
				page = min(500, limit-len(all.Sessions))
			}
			var l protocol.SessionList
			if err := a.callOn(ctx, c, protocol.MethodSessionList, protocol.SessionListParams{Limit: page, Cursor: cursor}, &l); err != nil {
				return err
			}
			all.Sessions = append(all.Sessions, l.Sessions...)
			cursor = l.NextCursor
			if cursor == "" || (limit > 0 && len(all.Sessions) >= limit) {
				all.NextCursor = cursor
				break
			}
		}
		if a.jsonOut {
			return a.printJSON(all)
		}
		if len(all.Sessions) == 0 {
			fmt.Fprintln(a.stdout, "no sessions; create one with `sessionctl new`")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tTITLE\tSTATE\tPENDING\tCWD\tCREATED")
		for _, s := range all.Sessions {
			state, err := a.sessionState(ctx, c, s)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.SessionID, orDash(clip(s.Title, 40)), state, s.PendingCount, s.Cwd, s.CreatedAt)
		}
		return tw.Flush()
	})
	return cmd
}

// sessionState is the STATE column of sessions, from session.list's
// counts; only a queued session is looked up (session.resume), for why its
// inputs wait.
func (a *app) sessionState(ctx context.Context, c *rpc.Client, s protocol.SessionSummary) (string, error) {
	switch {
	case s.UnknownCount > 0:
		return "held (unknown)", nil
	case s.OpenPromptCount > 0:
		return "waiting for you", nil
	case s.Running != nil:
		return "running", nil
	case s.PendingCount == 0:
		return "idle", nil
	}
	var snap protocol.Snapshot
	if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: s.SessionID}, &snap); err != nil {
		if errors.Is(err, protocol.ErrNotFound) {
			return "gone", nil
		}
		return "", err
	}
	if u := firstUnknown(snap.Pending); u != nil {
		return "held (unknown)", nil
	}
	for _, r := range snap.Pending {
		switch {
		case r.Status == "started":
			return "running", nil
		case r.Status == "queued" && r.Reason != "":
			return "queued (" + string(r.Reason) + ")", nil
		}
	}
	if len(snap.Pending) > 0 {
		return "queued", nil
	}
	return "idle", nil
}

// firstUnknown is the first admission of pending left unknown by a crash.
func firstUnknown(pending []protocol.Receipt) *protocol.Receipt {
	for i := range pending {
		if pending[i].Status == "unknown" {
			return &pending[i]
		}
	}
	return nil
}

func (a *app) newCommand() *cobra.Command {
	var p protocol.SessionCreateParams
	var toolsets string
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Create a session and print its id",
		Long: `Creates a session (session.create) and prints its id on stdout, so that
S=$(sessionctl new) works. The launch settings (cwd, model, base URL, tools)
are frozen into the session; what is not given comes from the daemon's
config.yaml. --cwd defaults to the current directory.`,
		Example: `  S=$(sessionctl new)
  sessionctl new --cwd ~/src/app --title "fix the tests"
  sessionctl new --model llama3.1 --base-url http://127.0.0.1:11434/v1
  sessionctl new --tools terminal --json`,
		Args: args(0, "no arguments"),
	}
	f := cmd.Flags()
	f.StringVar(&p.Cwd, "cwd", "", "working directory of the session's tools (default: the current directory)")
	f.StringVar(&p.Model, "model", "", "model name (default: model.default of config.yaml)")
	f.StringVar(&p.BaseURL, "base-url", "", "OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1 (default: config.yaml)")
	f.StringVar(&p.Provider, "provider", "", "openai or custom (both: OpenAI-compatible Chat Completions)")
	f.StringVar(&p.Title, "title", "", "a title for the session list")
	f.StringVar(&toolsets, "tools", "", `comma-separated toolsets: terminal,clarify (default both; "none" for no tools)`)
	f.StringVar(&p.RequestID, "request-id", "", "idempotency key: the same id with the same settings returns the same session")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if p.Cwd == "" {
			wd, err := os.Getwd()
			if err != nil {
				return fail(exitFailed, "cannot determine the current directory: %v (use --cwd)", err)
			}
			p.Cwd = wd
		}
		abs, err := filepath.Abs(p.Cwd)
		if err != nil {
			return usageError("--cwd %s: %v", p.Cwd, err)
		}
		p.Cwd = abs
		if cmd.Flags().Changed("tools") {
			ts := []string{}
			if toolsets != "none" {
				for _, t := range strings.Split(toolsets, ",") {
					if t = strings.TrimSpace(t); t != "" {
						ts = append(ts, t)
					}
				}
			}
			p.Toolsets = &ts
		}
		p.Source = "cli"
		var snap protocol.Snapshot
		if err := a.call(ctx, protocol.MethodSessionCreate, p, &snap); err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(snap)
		}
		fmt.Fprintln(a.stdout, snap.SessionID)
		return nil
	})
	return cmd
}

// pendingView is the JSON of `pending --json`.
type pendingView struct {
	SessionID           string             `json:"session_id"`
	ExecutionGeneration int64              `json:"execution_generation"`
	Running             *string            `json:"running"`
	Pending             []protocol.Receipt `json:"pending"`
	Prompts             []protocol.Prompt  `json:"prompts"`
}

func (a *app) pendingCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pending SESSION",
		Short: "Show a session's pending inputs and open prompts",
		Long: `Lists every admission of the session that is not settled yet (started,
queued with the reason it waits, or unknown after a daemon crash), in FIFO
order, and the open approval/clarify prompts of the running turn with their
ids (for approve and answer).`,
		Example: `  sessionctl pending "$S"
  sessionctl pending "$S" --json | jq '.pending[] | select(.status == "unknown")'`,
		Args: args(1, "SESSION"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		snap, err := a.snapshot(ctx, args[0])
		if err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(pendingView{SessionID: snap.SessionID, ExecutionGeneration: snap.ExecutionGeneration,
				Running: snap.Running, Pending: nonNil(snap.Pending), Prompts: nonNil(snap.Prompts)})
		}
		if len(snap.Pending) == 0 {
			fmt.Fprintln(a.stdout, "no pending inputs")
		} else {
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tADMISSION\tSTATUS\tGEN\tINPUT_ID\tSENDER\tTEXT")
			for _, r := range snap.Pending {
				status := r.Status
				switch {
				case r.SteeredInto != "":
					status += " (steered into " + protocol.AdmissionStatus(r.SteeredInto) + ")"
				case r.Reason != "" && r.Delivery == protocol.DeliverySteer:
					status += " (steer, " + protocol.AdmissionStatus(r.Reason) + ")"
				case r.Reason != "":
					status += " (" + protocol.AdmissionStatus(r.Reason) + ")"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.AdmissionID, status, genString(r.ExecutionGeneration), r.InputID, senderName(r.Sender), clip(oneLine(r.Text), 50))
			}
			tw.Flush()
			if r := firstUnknown(snap.Pending); r != nil {
				fmt.Fprintf(a.stdout, "\n%s is unknown: the daemon stopped while it ran. Decide with: %s\n", r.AdmissionID, a.cmdline("resolve", snap.SessionID, r.AdmissionID))
			}
		}
		if len(snap.Prompts) > 0 {
			fmt.Fprintln(a.stdout)
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PROMPT\tKIND\tGEN\tDETAIL")
			for _, p := range snap.Prompts {
				detail := promptSummary(p)
				if p.Kind != "approval" { // an approval shows its full command: what is approved is what runs
					detail = clip(detail, 70)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", p.PromptID, p.Kind, p.ExecutionGeneration, detail)
			}
			tw.Flush()
		}
		return nil
	})
	return cmd
}

// snapshot connects and resumes sessionID once.
func (a *app) snapshot(ctx context.Context, sessionID string) (protocol.Snapshot, error) {
	var snap protocol.Snapshot
	err := a.call(ctx, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: sessionID}, &snap)
	return snap, err
}

func (a *app) resolveCommand() *cobra.Command {
	var yes bool
	var gen int64
	cmd := &cobra.Command{
		Use:   "resolve SESSION ADMISSION",
		Short: "Settle an unknown admission as interrupted (prompt.resolve_unknown)",
		Long: `An admission is "unknown" when the daemon died while it ran: its effects are
uncertain and it holds its session's queue. resolve is the operator's
decision that it will not run again: it settles terminal/interrupted, the
transcript gets a closing boundary, and the queue moves on. It never re-runs
the input. resolve first shows the admission's text and generation and asks
for confirmation on stdin, unless --yes.`,
		Example: `  sessionctl pending "$S"                         # find the unknown admission
  sessionctl resolve "$S" adm_0199c0de-...        # shows it, asks y/N
  sessionctl resolve "$S" adm_0199c0de-... --yes  # for scripts`,
		Args: args(2, "SESSION ADMISSION"),
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().Int64Var(&gen, "generation", 0, "the admission's execution generation (default: read from the session)")
	a.addJSONFlag(cmd)
	cmd.RunE = a.verb(false, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		sessionID, admissionID := args[0], args[1]
		c, _, err := a.connect(ctx, rpc.DialOptions{})
		if err != nil {
			return err
		}
		defer c.Close()
		var snap protocol.Snapshot
		if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: sessionID}, &snap); err != nil {
			return err
		}
		var adm *protocol.Receipt
		for i := range snap.Pending {
			if snap.Pending[i].AdmissionID == admissionID {
				adm = &snap.Pending[i]
			}
		}
		if !cmd.Flags().Changed("generation") {
			switch {
			case adm == nil:
				// Not pending: let the daemon say whether it does not
				// exist (not_found, exit 4) or is settled already. A
				// generation of 0 never resolves anything.
				var r protocol.Receipt
				err := a.callOn(ctx, c, protocol.MethodResolveUnknown, protocol.ResolveUnknownParams{SessionID: sessionID, AdmissionID: admissionID, ExecutionGeneration: &gen}, &r)
				if err == nil || errors.Is(err, protocol.ErrStaleGeneration) {
					return fail(exitFailed, "admission %s is not pending in session %s: it is settled already; nothing to resolve (see sessionctl pending %s)", admissionID, sessionID, sessionID)
				}
				return err
			case adm.Status != "unknown":
				return fail(exitFailed, "admission %s is %s, not unknown; only unknown admissions are resolved (a running turn: sessionctl interrupt; a queued one: sessionctl cancel)", admissionID, adm.Status)
			case adm.ExecutionGeneration != nil:
				gen = *adm.ExecutionGeneration
			}
		}
		if !yes {
			if adm != nil {
				fmt.Fprintf(a.stderr, "admission %s (seq %d, input_id %s, generation %s, status %s):\n  %s\n",
					admissionID, adm.Seq, adm.InputID, genString(adm.ExecutionGeneration), adm.Status, clip(oneLine(adm.Text), 200))
			} else {
				fmt.Fprintf(a.stderr, "admission %s is not pending in session %s; resolving it with generation %d\n", admissionID, sessionID, gen)
			}
			fmt.Fprint(a.stderr, "Resolve it as interrupted? It will never run again. [y/N] ")
			line, _ := bufio.NewReader(a.stdin).ReadString('\n')
			if f, ok := a.stdin.(*os.File); !ok || !isTerminal(f) {
				fmt.Fprintln(a.stderr) // the answer was not echoed
			}
			if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
				return fail(exitFailed, "not resolved (answer y to resolve, or pass --yes)")
			}
		}
		var r protocol.Receipt
		err = a.callOn(ctx, c, protocol.MethodResolveUnknown, protocol.ResolveUnknownParams{SessionID: sessionID, AdmissionID: admissionID, ExecutionGeneration: &gen}, &r)
		if errors.Is(err, protocol.ErrStaleGeneration) {
			if adm != nil && adm.Status == "unknown" && adm.ExecutionGeneration != nil && *adm.ExecutionGeneration != gen {
				return fail(exitFailed, "admission %s is unknown with generation %d, not %d: nothing resolved (omit --generation to use its own)", admissionID, *adm.ExecutionGeneration, gen)
			}
			return fail(exitFailed, "admission %s is not unknown with generation %d (already resolved, settled, or never crashed): %v", admissionID, gen, err)
		}
		if err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		fmt.Fprintf(a.stdout, "resolved %s: %s/%s; the session's queue moves on\n", r.AdmissionID, r.Status, deref(r.Outcome))
		return nil
	})
	return cmd
}

func (a *app) cancelCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel SESSION ADMISSION",
		Short: "Cancel a queued input (prompt.cancel)",
		Long: `Cancels an admission that is still queued: it settles terminal/cancelled and
never runs. A started admission cannot be cancelled (use interrupt), nor an
unknown one (use resolve).`,
		Example: `  sessionctl pending "$S"
  sessionctl cancel "$S" adm_0199c0de-...`,
		Args: args(2, "SESSION ADMISSION"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		var r protocol.Receipt
		err := a.call(ctx, protocol.MethodPromptCancel, protocol.AdmissionRef{SessionID: args[0], AdmissionID: args[1]}, &r)
		switch {
		case errors.Is(err, protocol.ErrNotQueued):
			return fail(exitFailed, "admission %s is no longer queued (a running turn: %s)", args[1], a.cmdline("interrupt", args[0]))
		case errors.Is(err, protocol.ErrUnknownExecution):
			return fail(exitFailed, "admission %s is unknown after a daemon crash; decide with: %s", args[1], a.cmdline("resolve", args[0], args[1]))
		case err != nil:
			return err
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		fmt.Fprintf(a.stdout, "cancelled %s (seq %d, input_id %s)\n", r.AdmissionID, r.Seq, r.InputID)
		return nil
	})
	return cmd
}

func (a *app) interruptCommand() *cobra.Command {
	var gen int64
	cmd := &cobra.Command{
		Use:   "interrupt SESSION",
		Short: "Stop the session's running turn (session.interrupt)",
		Long: `Stops the running turn: its tool processes are killed, its open prompts
close, it settles terminal/interrupted and the queue moves on. Returns once
the turn has settled. With --generation, only that execution is stopped
(stale_generation otherwise), so a late interrupt never hits the next turn.
An input left unknown by a daemon crash is not running and is not
interrupted: interrupt names it, and resolve settles it.`,
		Example: `  sessionctl interrupt "$S"
  sessionctl interrupt "$S" --generation 7`,
		Args: args(1, "SESSION"),
	}
	cmd.Flags().Int64Var(&gen, "generation", 0, "interrupt only this execution generation")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		p := protocol.InterruptParams{SessionID: args[0]}
		if cmd.Flags().Changed("generation") {
			p.ExecutionGeneration = &gen
		}
		c, _, err := a.connect(ctx, rpc.DialOptions{})
		if err != nil {
			return err
		}
		defer c.Close()
		var r protocol.InterruptResult
		if err := a.callOn(ctx, c, protocol.MethodInterrupt, p, &r); err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		if r.Interrupted == nil {
			// A session held by an unknown admission runs nothing, but it
			// is not free either: say how to release it.
			var snap protocol.Snapshot
			if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: p.SessionID}, &snap); err != nil {
				return err
			}
			if u := firstUnknown(snap.Pending); u != nil {
				fmt.Fprintf(a.stdout, "nothing was running, but admission %s is unknown (the daemon stopped while it ran) and holds the session's queue; decide with: %s\n", u.AdmissionID, a.cmdline("resolve", p.SessionID, u.AdmissionID))
			} else {
				fmt.Fprintln(a.stdout, "nothing was running")
			}
		} else {
			fmt.Fprintf(a.stdout, "interrupted %s\n", *r.Interrupted)
		}
		return nil
	})
	return cmd
}

// livePrompt finds promptID among the open prompts of the session and
// returns its generation (or the session's live generation when the
// prompt is not open, so the daemon says why: not_found, stale or
// already_resolved).
func (a *app) livePrompt(ctx context.Context, c *rpc.Client, sessionID, promptID string) (int64, *protocol.Prompt, error) {
	var snap protocol.Snapshot
	if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: sessionID}, &snap); err != nil {
		return 0, nil, err
	}
	for i, p := range snap.Prompts {
		if p.PromptID == promptID {
			return p.ExecutionGeneration, &snap.Prompts[i], nil
		}
	}
	return snap.ExecutionGeneration, nil, nil
}

func (a *app) respond(ctx context.Context, method string, p protocol.RespondParams, genSet bool) (protocol.RespondResult, error) {
	var r protocol.RespondResult
	c, _, err := a.connect(ctx, rpc.DialOptions{})
	if err != nil {
		return r, err
	}
	defer c.Close()
	gen, open, err := a.livePrompt(ctx, c, p.SessionID, p.PromptID)
	if err != nil {
		return r, err
	}
	if open != nil {
		if msg := a.wrongVerb(method, p.SessionID, *open); msg != "" {
			return r, usageError("%s", msg)
		}
	}
	if !genSet {
		p.ExecutionGeneration = &gen
	}
	err = a.callOn(ctx, c, method, p, &r)
	if errors.Is(err, protocol.ErrStaleGeneration) {
		return r, fail(exitFailed, "prompt %s is no longer answerable: its turn ended, was interrupted, or the daemon restarted (%v)", p.PromptID, err)
	}
	return r, err
}

// wrongVerb explains an approve on a clarify prompt, or an answer on an
// approval ("" when the verb fits the prompt).
func (a *app) wrongVerb(method, sessionID string, p protocol.Prompt) string {
	switch {
	case method == protocol.MethodApprovalRespond && p.Kind == "clarify":
		return fmt.Sprintf("prompt %s is a clarify question, not an approval; answer it with `%s`", p.PromptID, a.cmdline("answer", sessionID, p.PromptID, "TEXT..."))
	case method == protocol.MethodClarifyRespond && p.Kind == "approval":
		return fmt.Sprintf("prompt %s is an approval, not a clarify question; answer it with `%s`", p.PromptID, a.cmdline("approve", sessionID, p.PromptID, "--choice", "once|session|always|deny"))
	}
	return ""
}

func (a *app) approveCommand() *cobra.Command {
	var choice string
	var gen int64
	cmd := &cobra.Command{
		Use:   "approve SESSION PROMPT --choice once|session|always|deny",
		Short: "Answer an approval prompt (approval.respond)",
		Long: `Answers an open approval prompt of the running turn. once runs the command
this time; session allows the same pattern for the rest of the session;
always stores it in the daemon's allowlist; deny refuses it. A command the
model asks to run outside the sandbox (UNSANDBOXED in pending) offers only
once and deny: session or always count as once there. The first answer
wins: a second one reports that the prompt was already answered.`,
		Example: `  sessionctl pending "$S"                          # shows PROMPT ids
  sessionctl approve "$S" prm_0199c0de-... --choice once
  sessionctl approve "$S" prm_0199c0de-... --choice deny`,
		Args: args(2, "SESSION PROMPT"),
	}
	cmd.Flags().StringVarP(&choice, "choice", "c", "", "once, session, always or deny (required)")
	cmd.Flags().Int64Var(&gen, "generation", 0, "the prompt's execution generation (default: read from the session)")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		switch choice {
		case "once", "session", "always", "deny":
		case "":
			return usageError("approve needs --choice once|session|always|deny")
		default:
			return usageError("--choice must be once, session, always or deny, not %q", choice)
		}
		p := protocol.RespondParams{SessionID: args[0], PromptID: args[1], Choice: protocol.Choice(choice), ExecutionGeneration: &gen}
		r, err := a.respond(ctx, protocol.MethodApprovalRespond, p, cmd.Flags().Changed("generation"))
		if err != nil {
			return err
		}
		return a.printRespond(r, "approval "+choice)
	})
	return cmd
}

func (a *app) answerCommand() *cobra.Command {
	var gen int64
	cmd := &cobra.Command{
		Use:   "answer SESSION PROMPT TEXT...",
		Short: "Answer a clarify prompt (clarify.respond)",
		Long: `Answers an open clarify prompt of the running turn. One TEXT is sent as the
answer string (a choice's text, or free text); several TEXTs are sent as a
list: the selected choices of a multi-select question, or one answer per
question, in order, when the prompt asks several. TEXT is sent as written:
give a choice by its text ("blue"), not by its number as in attach.`,
		Example: `  sessionctl answer "$S" prm_0199c0de-... "blue"
  sessionctl answer "$S" prm_0199c0de-... "use the staging database"
  sessionctl answer "$S" prm_0199c0de-... red green   # multi-select`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 {
				return usageError("answer needs SESSION PROMPT TEXT... (got %d argument(s)); see sessionctl answer --help", len(args))
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&gen, "generation", 0, "the prompt's execution generation (default: read from the session)")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		var answer any = args[2]
		if len(args) > 3 {
			answer = args[2:]
		}
		raw, _ := json.Marshal(answer)
		p := protocol.RespondParams{SessionID: args[0], PromptID: args[1], Answer: raw, ExecutionGeneration: &gen}
		r, err := a.respond(ctx, protocol.MethodClarifyRespond, p, cmd.Flags().Changed("generation"))
		if err != nil {
			return err
		}
		return a.printRespond(r, "answer")
	})
	return cmd
}

// printRespond prints an answer's result. An answer that came after the
// prompt was answered (already_resolved) was not applied: exit 1.
func (a *app) printRespond(r protocol.RespondResult, what string) error {
	late := r.Status == "already_resolved"
	if a.jsonOut {
		if err := a.printJSON(r); err != nil || !late {
			return err
		}
	}
	if late {
		return fail(exitFailed, "prompt %s was already answered; the first answer stands and yours was not applied", r.PromptID)
	}
	fmt.Fprintf(a.stdout, "%s sent for %s\n", what, r.PromptID)
	return nil
}

func genString(g *int64) string {
	if g == nil {
		return "-"
	}
	return fmt.Sprint(*g)
}

func deref[T ~string](s *T) string {
	if s == nil {
		return ""
	}
	return string(*s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// heldSession is a session held by an unknown admission, with the command
// that resolves it (status).
type heldSession struct {
	SessionID           string `json:"session_id"`
	Title               string `json:"title"`
	AdmissionID         string `json:"admission_id"`
	ExecutionGeneration *int64 `json:"execution_generation"`
	Text                string `json:"text"`
	Resolve             string `json:"resolve"` // the sessionctl command line, as this program was run
}

// heldSessions finds the sessions an unknown admission holds (session.list
// pages, then session.resume of each) and their first unknown admission.
func (a *app) heldSessions(ctx context.Context, c *rpc.Client) ([]heldSession, error) {
	held := []heldSession{}
	cursor := ""
	for {
		var l protocol.SessionList
		if err := a.callOn(ctx, c, protocol.MethodSessionList, protocol.SessionListParams{Limit: 500, Cursor: cursor}, &l); err != nil {
			return nil, err
		}
		for _, s := range l.Sessions {
			if s.UnknownCount == 0 {
				continue
			}
			var snap protocol.Snapshot
			if err := a.callOn(ctx, c, protocol.MethodSessionResume, protocol.ResumeParams{SessionID: s.SessionID}, &snap); err != nil {
				if errors.Is(err, protocol.ErrNotFound) {
					continue // deleted meanwhile
				}
				return nil, err
			}
			if u := firstUnknown(snap.Pending); u != nil {
				held = append(held, heldSession{SessionID: s.SessionID, Title: s.Title, AdmissionID: u.AdmissionID,
					ExecutionGeneration: u.ExecutionGeneration, Text: u.Text, Resolve: a.cmdline("resolve", s.SessionID, u.AdmissionID)})
			}
		}
		if cursor = l.NextCursor; cursor == "" {
			return held, nil
		}
	}
}
