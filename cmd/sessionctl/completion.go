package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/protocol"
)

func (a *app) completionCommand(root *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script",
		Long: `Prints a completion script for bash, zsh or fish on stdout. It completes
verbs and flags, and session ids (with their titles) from the running daemon.
make install puts the scripts where the shells look for them.`,
		Example: `  sessionctl completion bash > ~/.local/share/bash-completion/completions/sessionctl
  sessionctl completion zsh > "${fpath[1]}/_sessionctl"
  sessionctl completion fish > ~/.config/fish/completions/sessionctl.fish
  source <(sessionctl completion bash)    # this shell only`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("completion needs the shell: bash, zsh or fish (got %d argument(s))", len(args))
			}
			switch args[0] {
			case "bash", "zsh", "fish":
				return nil
			}
			return usageError("completion: unknown shell %q; use bash, zsh or fish", args[0])
		},
		ValidArgs: []string{"bash", "zsh", "fish"},
	}
	cmd.RunE = a.verb(false, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		switch args[0] {
		case "bash":
			return root.GenBashCompletionV2(a.stdout, true)
		case "zsh":
			return root.GenZshCompletion(a.stdout)
		default:
			return root.GenFishCompletion(a.stdout, true)
		}
	})
	return cmd
}

// completeSession completes a SESSION first argument with the daemon's
// session ids (newest first, the title as description). Without a daemon
// it offers nothing, silently.
func (a *app) completeSession(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.connectTimeout = min(a.connectTimeout, time.Second)
	var l protocol.SessionList
	if err := a.call(ctx, protocol.MethodSessionList, protocol.SessionListParams{Limit: 500}, &l); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]string, 0, len(l.Sessions))
	for _, s := range l.Sessions {
		if s.Title != "" {
			out = append(out, s.SessionID+"\t"+s.Title)
		} else {
			out = append(out, s.SessionID)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
