package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
)

// queueCommand is `sessionctl queue [ls|edit|move|cancel]`: the session's
// queued inputs, edited in place (PROTOCOL.md 10.3).
func (a *app) queueCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List, edit, reorder or cancel a session's queued inputs",
		Long: `The inputs of a session that wait for their turn, in the order they will
run. ls lists them; edit replaces one's text (prompt.update); move puts one
before another, or at the front (prompt.move); cancel drops one
(prompt.cancel). An input that started meanwhile is refused (exit 1, "no
longer queued"): a change either applies whole or not at all. The order
and the edits are durable: they survive a daemon restart.`,
		Example: `  sessionctl queue ls "$S"
  sessionctl queue edit "$S" adm_0199c0de-... "run only the unit tests"
  sessionctl queue move "$S" adm_0199c0de-...            # to the front
  sessionctl queue move "$S" adm_0199c0de-... --before adm_0199c0df-...
  sessionctl queue cancel "$S" adm_0199c0de-...`,
	}
	cmd.AddCommand(a.queueLsCommand(), a.queueEditCommand(), a.queueMoveCommand(), a.cancelCommand())
	return cmd
}

// queuedView is the JSON of `queue ls --json`.
type queuedView struct {
	SessionID string             `json:"session_id"`
	Queued    []protocol.Receipt `json:"queued"`
}

func (a *app) queueLsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls SESSION",
		Short: "List the queued inputs in the order they will run",
		Args:  args(1, "SESSION"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		snap, err := a.snapshot(ctx, args[0])
		if err != nil {
			return err
		}
		out := queuedView{SessionID: snap.SessionID, Queued: []protocol.Receipt{}}
		for _, r := range snap.Pending {
			if r.Status == protocol.StatusQueued {
				out.Queued = append(out.Queued, r)
			}
		}
		if a.jsonOut {
			return a.printJSON(out)
		}
		if len(out.Queued) == 0 {
			fmt.Fprintln(a.stdout, "nothing queued")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tADMISSION\tDELIVERY\tINPUT_ID\tTEXT")
		for i, r := range out.Queued {
			d := r.Delivery
			if d == "" {
				d = protocol.DeliveryQueue
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, r.AdmissionID, d, r.InputID, clip(oneLine(r.Text), 60))
		}
		return tw.Flush()
	})
	return cmd
}

// queueRefusal explains prompt.update/move refusals of an admission that
// left the queue.
func (a *app) queueRefusal(err error, sessionID, admissionID string) error {
	switch {
	case errors.Is(err, protocol.ErrNotQueued):
		return fail(exitFailed, "%v: it is no longer queued (it started or settled); see %s", err, a.cmdline("pending", sessionID))
	case errors.Is(err, protocol.ErrUnknownExecution):
		return fail(exitFailed, "admission %s is unknown after a daemon crash; decide with: %s", admissionID, a.cmdline("resolve", sessionID, admissionID))
	}
	return err
}

func (a *app) queueEditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "edit SESSION ADMISSION TEXT",
		Short: `Replace a queued input's text ("-" reads it from stdin)`,
		Long: `Replaces the text of a queued input (prompt.update). A later resubmit of its
input id with the original or the new text is a duplicate, never a second input.`,
		Args: args(3, "SESSION ADMISSION TEXT"),
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		text := args[2]
		if text == "-" {
			b, err := io.ReadAll(a.stdin)
			if err != nil {
				return fail(exitFailed, "reading the text from stdin: %v", err)
			}
			text = string(b)
		}
		if text == "" {
			return usageError("edit needs a non-empty TEXT")
		}
		var r protocol.Receipt
		if err := a.call(ctx, protocol.MethodPromptUpdate, protocol.UpdateParams{SessionID: args[0], AdmissionID: args[1], Text: text}, &r); err != nil {
			return a.queueRefusal(err, args[0], args[1])
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		fmt.Fprintf(a.stdout, "updated %s (input_id %s)\n", r.AdmissionID, r.InputID)
		return nil
	})
	return cmd
}

func (a *app) queueMoveCommand() *cobra.Command {
	var before string
	cmd := &cobra.Command{
		Use:   "move SESSION ADMISSION",
		Short: "Move a queued input to the front, or before another (--before)",
		Args:  args(2, "SESSION ADMISSION"),
	}
	cmd.Flags().StringVar(&before, "before", "", "the queued admission to put it before (default: the front of the queue)")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if before == args[1] {
			return usageError("--before must name another admission")
		}
		var r protocol.MoveResult
		if err := a.call(ctx, protocol.MethodPromptMove, protocol.MoveParams{SessionID: args[0], AdmissionID: args[1], Before: before}, &r); err != nil {
			return a.queueRefusal(err, args[0], args[1])
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		for i, id := range r.Order {
			fmt.Fprintf(a.stdout, "%d\t%s\n", i+1, id)
		}
		return nil
	})
	return cmd
}

func (a *app) forkCommand() *cobra.Command {
	var through string
	cmd := &cobra.Command{
		Use:   "fork SESSION",
		Short: "Start a new session from a session's transcript (session.fork)",
		Long: `Creates a new session with the settings of SESSION and a copy of its
transcript through the turn of --through (a settled admission; default:
every settled turn), with an empty queue, and prints the new session's id.
The source session is unchanged; both go on independently.`,
		Example: `  F=$(sessionctl fork "$S")
  sessionctl fork "$S" --through adm_0199c0de-...`,
		Args: args(1, "SESSION"),
	}
	cmd.Flags().StringVar(&through, "through", "", "the last admission whose turn is copied (default: every settled turn)")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		var r protocol.ForkResult
		err := a.call(ctx, protocol.MethodSessionFork, protocol.ForkParams{SessionID: args[0], ThroughAdmissionID: through}, &r)
		if errors.Is(err, protocol.ErrNotTerminal) {
			return fail(exitFailed, "%v: fork through a settled turn (see %s)", err, a.cmdline("pending", args[0]))
		}
		if err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		fmt.Fprintln(a.stdout, r.SessionID)
		return nil
	})
	return cmd
}
