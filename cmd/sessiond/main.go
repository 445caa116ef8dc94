// Command sessiond is the session daemon: it serves JSON-RPC 2.0 over a
// WebSocket on loopback and runs agent sessions with a durable admission
// FIFO in SQLite (default) or PostgreSQL. See README.md and docs/protocol.md.
//
// It also hosts the sandbox's exec helper: started as "sessiond
// __sandbox-exec SPEC COMMAND", it builds the command's view, confines a
// thread of its own and forks /bin/sh from it (see package sandbox, whose
// init runs the helper before main).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/daemon"
	"github.com/sessiond/sessiond/protocol/schema"
	// The sandbox's exec helper entry runs from this package's init.
	_ "github.com/sessiond/sessiond/sandbox"
)

const usage = `sessiond — the sessiond daemon

Usage:
  sessiond [--home DIR] [--listen ADDR] [--log-level LEVEL] [--log-format FORMAT]
           [--log-file PATH] [--stop-timeout DURATION] [--store-dsn URL]
  sessiond --version
  sessiond classify [--home DIR] [COMMAND ...]   (see sessiond classify --help)
  sessiond schema                                (the protocol's JSON Schema, draft 2020-12)

The home directory is --home, else $SESSIOND_HOME, else
$XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond. It is created with
mode 0700 and holds config.yaml (optional), state.db (SQLite) and, while the
daemon runs, daemon.json: {"pid", "url", "token", "protocol", "version",
"boot_epoch", "started_at"}. Clients read the URL and the token from it.
The token is fresh at every start, unless config.yaml names auth:
{token_file: PATH}: a 0600 file holding the token (created when missing),
so that daemons sharing a store accept one token (docs/scale-out.md).

The store is SQLite (state.db in the home) unless config.yaml says
store: {driver: postgres, dsn: postgres://USER:PASSWORD@HOST:PORT/DBNAME},
or $SESSIOND_STORE_DSN or --store-dsn names a PostgreSQL database (a DSN
alone means driver postgres; --store-dsn wins over the environment, which
fills the file's dsn when it has none; ?pool_max_conns=N in the DSN, or
store: {max_conns: N}, sizes its connection pool, default 16). Logs and
daemon.info never show the DSN's password. Several daemons may share one PostgreSQL database
(config.yaml cluster: {lease_ttl: 10, label: ""}): each session runs on
one daemon at a time, and another takes it over lease_ttl seconds after
that daemon dies, with the same rules as a restart; a graceful stop hands
its sessions over at once (docs/scale-out.md).

Terminal commands run in a sandbox (config.yaml sandbox: {mode:
workspace-write | read-only | off, network: false, writable_roots: [],
readable_roots: []}): a view of only what a command may use (system trees
and your home read-only without its credential stores, the cwd and
writable roots, a private /tmp; never the daemon's home, token file or
store sockets), Landlock, seccomp, private mount, PID and IPC namespaces
and no capabilities, applied by this binary itself ("sessiond
__sandbox-exec", a hidden entry); setup errors run nothing. Where
the kernel cannot sandbox, the daemon warns and every command needs
approval, unless the config says sandbox: {mode: off}.

Signals: SIGTERM or SIGINT stop gracefully (running turns settle
interrupted, queued inputs stay queued and start after the next boot, or
at once on another daemon of the cluster); a
second signal exits at once. SIGHUP reopens --log-file (for logrotate). SIGKILL is a crash: the next boot marks the
running turn unknown and holds its session until an operator resolves it.

Exit codes: 0 clean stop; 1 start-up failure (bad config, home locked by
another daemon, store unavailable); 2 bad flags; 3 forced exit on a second
signal or a stop that could not settle every turn.

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "classify" {
		return classifyMain(args[1:], os.Stdin, os.Stdout, stderr)
	}
	if len(args) > 0 && args[0] == "schema" {
		if len(args) > 1 {
			fmt.Fprintln(stderr, "usage: sessiond schema (prints the protocol's JSON Schema, docs/schema.json)")
			return 2
		}
		doc, err := schema.Document()
		if err != nil {
			fmt.Fprintln(stderr, "sessiond schema:", err)
			return 1
		}
		os.Stdout.Write(doc)
		return 0
	}
	fs := flag.NewFlagSet("sessiond", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "home directory (default $SESSIOND_HOME, $XDG_STATE_HOME/sessiond or ~/.local/state/sessiond)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	format := fs.String("log-format", "text", "log format: text or json")
	logPath := fs.String("log-file", "", "append the log to this file (created 0600) instead of stderr; SIGHUP reopens it")
	listen := fs.String("listen", "", "loopback address to serve on, e.g. 127.0.0.1:8765 (overrides config.yaml's listen; default 127.0.0.1:0, a new port each start)")
	version := fs.Bool("version", false, "print the version and exit")
	stopTimeout := fs.Duration("stop-timeout", 30*time.Second, "how long a graceful stop waits for running turns to settle")
	storeDSN := fs.String("store-dsn", "", "PostgreSQL database to use instead of state.db, postgres://USER:PASSWORD@HOST:PORT/DBNAME (overrides config.yaml's store and $SESSIOND_STORE_DSN)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		// As the usage line spells them (the flag package takes - and --).
		fs.VisitAll(func(f *flag.Flag) {
			arg, text := flag.UnquoteUsage(f)
			fmt.Fprintf(stderr, "  --%s", f.Name)
			if arg != "" {
				fmt.Fprintf(stderr, " %s", arg)
			}
			fmt.Fprintf(stderr, "\n    \t%s", text)
			if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(stderr, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(stderr)
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessiond: unexpected argument %q (see --help)\n", fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Fprintln(os.Stdout, "sessiond", daemon.Version)
		return 0
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "sessiond: --log-level: %v\n", err)
		return 2
	}
	opts := &slog.HandlerOptions{Level: lv}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "sessiond: --log-format must be text or json, not %q\n", *format)
		return 2
	}
	logOut := stderr
	if *logPath != "" {
		lf, err := openLogFile(*logPath)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond: %v\n", err)
			return 1
		}
		defer lf.Close()
		logOut = lf
		hups := make(chan os.Signal, 1)
		signal.Notify(hups, syscall.SIGHUP)
		defer signal.Stop(hups)
		go func() {
			for range hups {
				if err := lf.Reopen(); err != nil {
					slog.Error("SIGHUP: cannot reopen the log file; logging on to the previous one", "path", *logPath, "err", err)
				} else {
					slog.Info("SIGHUP: log file reopened", "path", *logPath)
				}
			}
		}()
	}
	var h slog.Handler
	if *format == "json" {
		h = slog.NewJSONHandler(logOut, opts)
	} else {
		h = slog.NewTextHandler(logOut, opts)
	}
	log := slog.New(h)
	if err := harden(); err != nil {
		log.Warn("cannot make the process non-dumpable; commands of the same user may read its environment", "err", err)
	}
	slog.SetDefault(log)

	dir, err := daemon.ResolveHome(*home)
	if err != nil {
		fmt.Fprintf(stderr, "sessiond: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	d, err := daemon.Start(context.Background(), daemon.Options{Home: dir, Logger: log, Listen: *listen, StoreDSN: *storeDSN})
	if err != nil {
		fmt.Fprintf(stderr, "sessiond: %v\n", err)
		return 1
	}
	sig := <-sigs
	log.Info("signal received; stopping gracefully (send it again to exit at once)", "signal", sig.String())
	ctx, cancel := context.WithTimeout(context.Background(), *stopTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- d.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			log.Error("stop incomplete", "err", err)
			return 3
		}
		return 0
	case sig := <-sigs:
		log.Warn("second signal: exiting now", "signal", sig.String())
		return 3
	}
}
