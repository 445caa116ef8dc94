package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
)

func (a *app) pairCommand() *cobra.Command {
	var (
		label     string
		ttl       time.Duration
		sessionID string
		readOnly  bool
	)
	cmd := &cobra.Command{
		Use:   "pair",
		Short: "Print a one-time code that pairs a new client (a device or a person)",
		Long: `Asks the daemon (with its own token, from daemon.json) for a one-time pairing
code and prints it alone on stdout. The new client opens a WebSocket on
GET /pair without a token, calls auth.pair {code, label?} and gets a token of
its own, which it uses on /rpc like the daemon's. The code expires after
--ttl and works once. Everything the client submits is attributed to it
(its client_id and label); revoke it with "sessionctl clients rm ID".
--session limits the client to one session; --read-only lets it resume and
watch but not submit, answer, cancel, interrupt or resolve.`,
		Example: `  CODE=$(sessionctl pair --label "phone" --ttl 5m)
  sessionctl pair --label "reviewer" --session "$S" --read-only`,
		Args: args(0, "no arguments"),
	}
	cmd.Flags().StringVar(&label, "label", "", "the client's name, e.g. \"Safari on Mac\" (the client may give its own)")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "how long the code stays valid (at most 24h)")
	cmd.Flags().StringVar(&sessionID, "session", "", "limit the client to this session (others are not_found to it)")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "the client may resume, list and watch only")
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if ttl < time.Second || ttl > 24*time.Hour {
			return usageError("--ttl must be between 1s and 24h, not %s", ttl)
		}
		var r protocol.PairingCodeResult
		if err := a.call(ctx, protocol.MethodPairingCode, protocol.PairingCodeParams{Label: label, TTLSeconds: int64(ttl / time.Second),
			SessionID: sessionID, ReadOnly: readOnly}, &r); err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(r)
		}
		fmt.Fprintln(a.stdout, r.Code)
		return nil
	})
	return cmd
}

func (a *app) clientsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clients [ls | rm ID]",
		Short: "List or revoke paired clients",
		Long: `clients (or clients ls) lists the clients paired with "sessionctl pair":
id, label, scope, when paired, last used and revoked. clients rm ID (or
revoke ID) revokes one: its open connections are closed at once (1008) and
its token is refused from then on (401). The daemon's own token is not
affected.`,
		Example: `  sessionctl clients
  sessionctl clients rm cli_0192…`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0, len(args) == 1 && args[0] == "ls":
				return nil
			case len(args) == 2 && (args[0] == "rm" || args[0] == "revoke"):
				return nil
			case len(args) >= 1 && (args[0] == "rm" || args[0] == "revoke"):
				return usageError("clients %s needs ID (got %d argument(s)); see sessionctl clients --help", args[0], len(args)-1)
			}
			return usageError("clients takes ls or rm ID, not %q; see sessionctl clients --help", strings.Join(args, " "))
		},
	}
	a.addJSONFlag(cmd)
	a.addTimeoutFlag(cmd)
	cmd.RunE = a.verb(true, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if len(args) == 2 {
			var r protocol.RevokeResult
			if err := a.call(ctx, protocol.MethodClientsRevoke, protocol.ClientRef{ClientID: args[1]}, &r); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(r)
			}
			fmt.Fprintf(a.stdout, "revoked %s (%d connection(s) closed)\n", r.ClientID, r.Closed)
			return nil
		}
		var l protocol.ClientsList
		if err := a.call(ctx, protocol.MethodClientsList, struct{}{}, &l); err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(l)
		}
		if len(l.Clients) == 0 {
			fmt.Fprintln(a.stdout, "no paired clients")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tLABEL\tSCOPE\tPAIRED\tLAST USED\tREVOKED")
		for _, c := range l.Clients {
			scope := "all sessions"
			if c.SessionID != "" {
				scope = "session " + c.SessionID
			}
			if c.ReadOnly {
				scope += ", read-only"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ClientID, c.Label, scope, c.CreatedAt, orDash(c.LastUsedAt), orDash(c.RevokedAt))
		}
		return tw.Flush()
	})
	return cmd
}

// senderName is how a sender is shown: "owner" or the paired client's
// label and id, then the client program and version, e.g.
// `phone (cli_…) via sessiond-web/1.2`; "-" when unknown.
func senderName(s *protocol.Sender) string {
	if s == nil {
		return "-"
	}
	who := s.ID
	if s.ID != protocol.SenderOwner && s.Label != "" {
		who = s.Label + " (" + s.ID + ")"
	}
	if s.Client != "" {
		who += " via " + s.Client
		if s.Version != "" {
			who += "/" + s.Version
		}
	}
	return who
}

// userPrefix starts a user message: "you › " for the daemon token's owner
// (and rows from before pairing), "LABEL › " for a paired client.
func userPrefix(s *protocol.Sender) string {
	if s == nil || s.ID == protocol.SenderOwner || s.ID == "" {
		return "you › "
	}
	if s.Label != "" {
		return s.Label + " › "
	}
	return s.ID + " › "
}
