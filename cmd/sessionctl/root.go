package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/rpc"
)

// version is sessionctl's version, set with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// app holds the global flags and the streams of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	home           string
	prog           string // how this program was invoked, for hints (cmdline)
	connectTimeout time.Duration
	timeout        time.Duration
	jsonOut        bool

	// started is set once a verb's RunE runs; errors before that are
	// command-line errors (exit 2).
	started bool
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, prog: "sessionctl"}
}

// cmdline returns a sessionctl command line to print in a hint, ready to
// paste: the program as it was invoked (bin/sessionctl when run by a path,
// sessionctl when found on PATH), the --home given, if any, then args,
// which the caller has shell-quoted where needed.
func (a *app) cmdline(args ...string) string {
	parts := []string{a.prog}
	if a.home != "" {
		parts = append(parts, "--home", shellQuote(a.home))
	}
	return strings.Join(append(parts, args...), " ")
}

// progName is how a hint names this program: argv[0] when it was run by a
// path (it holds a slash), else "sessionctl" (found on PATH).
func progName(argv0 string) string {
	if strings.Contains(argv0, "/") {
		return shellQuote(argv0)
	}
	return "sessionctl"
}

const rootLong = `sessionctl is the terminal client and operator CLI of sessiond.

It finds the daemon through HOME/daemon.json, where HOME is --home, else
$SESSIOND_HOME, else $XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond
(the daemon resolves its home the same way). In the repository, ` + "`make run`" + `
serves ./.home unless SESSIOND_HOME is set: export
SESSIOND_HOME=$PWD/.home (or pass --home) so that sessionctl finds it.
It authenticates with the descriptor's token and speaks only the public
protocol (docs/protocol.md).

Every error is one line on stderr starting with "sessionctl:".

` + exitCodesHelp

const rootExample = `  # in one terminal: the daemon, on a home of your choice
  sessiond --home ~/.sessiond       # in the repository: SESSIOND_HOME=~/.sessiond make run

  # in another: the client, on the same home
  export SESSIOND_HOME=~/.sessiond
  sessionctl status
  S=$(sessionctl new --cwd ~/src/project --title demo)
  sessionctl attach "$S"                 # interactive
  sessionctl send "$S" "list the files"  # scripted: prints the reply`

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "sessionctl",
		Short:         "Terminal client and operator CLI for sessiond",
		Long:          rootLong,
		Example:       rootExample,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No verb: show the help (exit 0).
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q", args[0])
			}
			return cmd.Help()
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError("%v (see sessionctl %s --help)", err, cmd.Name())
	})
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.home, "home", "", "daemon home directory (default $SESSIOND_HOME, else $XDG_STATE_HOME/sessiond or ~/.local/state/sessiond)")
	pf.DurationVar(&a.connectTimeout, "connect-timeout", 5*time.Second, "how long to wait for the daemon to accept the connection")
	root.SetVersionTemplate("sessionctl {{.Version}}\n")

	root.AddCommand(
		a.statusCommand(),
		a.sessionsCommand(),
		a.newCommand(),
		a.attachCommand(),
		a.sendCommand(),
		a.pendingCommand(),
		a.resolveCommand(),
		a.cancelCommand(),
		a.queueCommand(),
		a.forkCommand(),
		a.interruptCommand(),
		a.approveCommand(),
		a.answerCommand(),
		a.renameCommand(),
		a.rmCommand(),
		a.showCommand(),
		a.approvalsCommand(),
		a.acpCommand(),
		a.pairCommand(),
		a.clientsCommand(),
	)
	root.AddCommand(a.completionCommand(root))
	for _, c := range root.Commands() {
		c.Long = c.Short + ".\n\n" + c.Long + "\n\n" + exitCodesPointer
		c.SetFlagErrorFunc(root.FlagErrorFunc())
		if strings.HasPrefix(strings.TrimPrefix(c.Use, c.Name()), " SESSION") {
			c.ValidArgsFunction = a.completeSession
		}
	}
	return root
}

// verb wraps a RunE so that errors from it are not mistaken for usage
// errors, and applies --timeout to one-shot verbs (timeout 0: none).
func (a *app) verb(withTimeout bool, f func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.started = true
		ctx := cmd.Context()
		if withTimeout && a.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, a.timeout)
			defer cancel()
		}
		return f(ctx, cmd, args)
	}
}

// args checks the positional arguments (exit 2 otherwise).
func args(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("%s needs %s (got %d argument(s)); see sessionctl %s --help", cmd.Name(), names, len(args), cmd.Name())
		}
		return nil
	}
}

func (a *app) addJSONFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&a.jsonOut, "json", false, "print the result as JSON")
}

func (a *app) addTimeoutFlag(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&a.timeout, "timeout", 30*time.Second, "give up after this long, exit 5 (0: never)")
}

// printJSON writes v indented to stdout.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// call connects, runs one request and closes.
func (a *app) call(ctx context.Context, method string, params, result any) error {
	c, _, err := a.connect(ctx, rpc.DialOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	return a.callOn(ctx, c, method, params, result)
}

// callOn runs one request on c, explaining a lost connection.
func (a *app) callOn(ctx context.Context, c *rpc.Client, method string, params, result any) error {
	err := c.Call(ctx, method, params, result)
	if err != nil && c.Err() != nil && ctx.Err() == nil {
		return fail(exitUnreachable, "lost the daemon during %s: %s", method, describeClosed(c.Err()))
	}
	return err
}
