// Command sessiond-load drives a sessiond daemon with many WebSocket JSON-RPC
// clients against an in-process fake OpenAI-compatible model, and reports
// throughput, latency percentiles per method, errors by reason, turns and
// memory (RSS) of the daemon and of itself. See docs/performance.md, section
// "Load command", for the figures it produced and the commands.
//
// It is a separate binary so that sessionctl stays a small client; it speaks
// only the public protocol (package rpc) and never imports the daemon.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/protocol"
)

// Exit codes.
const (
	exitOK         = 0 // the run completed without unexpected errors
	exitUnexpected = 1 // unexpected errors, failed turns, or a daemon crash marker or unclean exit
	exitUsage      = 2 // bad flags
	exitSetup      = 3 // no daemon, spawn failed, or the setup phase failed
)

const usage = `sessiond-load — load generator for sessiond

Usage:
  sessiond-load --spawn PATH/TO/sessiond [flags]   own daemon on a temporary home
  sessiond-load --spawn PATH/TO/sessiond --daemons N --store-dsn URL [flags]
                                                   N daemons sharing one PostgreSQL
  sessiond-load --home DIR[,DIR...] [flags]        running daemon(s) (HOME/daemon.json)

With --spawn, the daemon runs on a fresh temporary home whose config.yaml
points at this tool's in-process fake model (approvals.mode off,
limits.max_connections raised to fit --clients), merged with
--config-extra; it gets SIGTERM at the end and its stderr is checked for
panics and data races. With --home, sessions are still created against the
tool's fake model (session.create with model, provider custom and base_url),
so no real model is ever called; they stay in that home's store, so use a
scratch home.

Several daemons (issue 17, docs/scale-out.md): with --daemons N and
--store-dsn URL, --spawn starts N daemons, each on its own temporary home,
all with store: {driver: postgres, dsn: URL}, cluster: {lease_ttl:
--lease-ttl} and one auth.token_file in a temporary directory; with --home
DIR,DIR,... the tool targets daemons already running on those homes (they
must share a store and a token). Clients, and the setup's connections, are
dealt round-robin over the daemons. Memory and CPU figures are the first
daemon's. Use an empty database: the run's sessions stay in it.

Modes:
  mixed   (default) every client loops at --rate ops/s (open loop: each
          operation starts at its due time whether or not the previous one
          answered, and latency counts from the due time) over its sessions:
          prompt.submit, session.resume with after_seq, duplicate submits
          (must come back duplicate:true), session.create; see --mix.
  idle    opens --clients authenticated connections, each does one
          daemon.info (or session.resume when --sessions > 0), then holds
          them idle for --duration and reports the daemon's RSS per
          connection.
  resume  creates --sessions sessions (concurrently), then --clients
          clients call session.resume on random ones for --duration.

Report: per method count, ok/s, p50/p90/p99/p99.9/max latency (HDR
histogram, µs resolution); errors by JSON-RPC reason (overloaded and
draining are designed refusals), transport errors (closes 1001/1008/1013
are designed) and failed checks separately; turns submitted/completed/
failed and their latency to turn.completed; daemon VmRSS/VmHWM, threads
and fds (from /proc/PID/status, pid from daemon.info) and this tool's own.
--json prints the same as one JSON object.

Exit codes: 0 no unexpected errors; 1 unexpected errors, failed turns or a
daemon crash/unclean exit; 2 bad flags; 3 no daemon, spawn or setup failed.

Flags:
`

// options are the parsed flags.
type options struct {
	mode           string
	clients        int
	sessions       int // -1: the mode's default
	duration       time.Duration
	rate           float64 // ops/s per client; 0 = closed loop
	jitter         float64 // each interval is uniform in [1-j, 1+j] × 1/rate
	mix            []mixEntry
	mixText        string
	tools          float64
	think          time.Duration
	chunkDelay     time.Duration
	home           string
	homes          []string // --home split on commas
	spawn          string
	daemons        int
	storeDSN       string
	leaseTTL       int
	configExtra    string
	keepHome       bool
	jsonOut        bool
	jsonFile       string
	quiet          bool
	callTimeout    time.Duration
	drain          time.Duration
	dialWorkers    int
	createWorkers  int
	readyTimeout   time.Duration
	progressPeriod time.Duration
}

type mixEntry struct {
	op     string
	weight int
}

// knownOps are the operations --mix may name.
var knownOps = []string{"submit", "duplicate", "resume", "create", "info", "list"}

func parseMix(s string) ([]mixEntry, error) {
	var out []mixEntry
	total := 0
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("--mix: %q is not OP=WEIGHT", part)
		}
		known := false
		for _, k := range knownOps {
			known = known || k == name
		}
		if !known {
			return nil, fmt.Errorf("--mix: unknown operation %q (known: %s)", name, strings.Join(knownOps, ", "))
		}
		out = append(out, mixEntry{name, n})
		total += n
	}
	if total == 0 {
		return nil, errors.New("--mix: weights add up to 0")
	}
	return out, nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sessiond-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", "mixed", "workload: mixed, idle or resume")
	fs.IntVar(&o.clients, "clients", 10, "number of clients, one WebSocket connection each")
	fs.IntVar(&o.sessions, "sessions", -1, "sessions of the run: mixed: created before the window and dealt out to the clients (default --clients); idle: resumed once each by the connections (default 0: daemon.info instead); resume: created, then resumed at random (default 1000)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured window (idle: how long the connections are held)")
	fs.Float64Var(&o.rate, "rate", 1, "operations per second per client (0: closed loop, each client as fast as it gets answers)")
	fs.Float64Var(&o.jitter, "jitter", 0.5, "pacing jitter: each interval is uniform in [1-j, 1+j] × 1/rate (0 ≤ j < 1)")
	fs.StringVar(&o.mixText, "mix", "submit=60,resume=25,duplicate=10,create=5", "mixed: operation weights, OP=WEIGHT,... of "+strings.Join(knownOps, ", "))
	fs.Float64Var(&o.tools, "tools", 0, "share of submits (0..1) whose turn runs one terminal tool call (`true`)")
	fs.DurationVar(&o.think, "think", 0, "fake model: delay before the first byte of each reply")
	fs.DurationVar(&o.chunkDelay, "chunk-delay", 0, "fake model: delay between streamed chunks")
	fs.StringVar(&o.home, "home", "", "target the daemon running on this home (reads HOME/daemon.json)")
	fs.StringVar(&o.spawn, "spawn", "", "start this sessiond binary on a temporary home and stop it (SIGTERM) at the end")
	fs.IntVar(&o.daemons, "daemons", 1, "--spawn: number of daemons, each on its own home, sharing --store-dsn (more than 1 needs --store-dsn)")
	fs.StringVar(&o.storeDSN, "store-dsn", "", "--spawn: PostgreSQL URL every spawned daemon uses as its store (store: {driver: postgres, dsn})")
	fs.IntVar(&o.leaseTTL, "lease-ttl", 10, "--spawn with --store-dsn: cluster.lease_ttl of the daemons, in seconds")
	fs.StringVar(&o.configExtra, "config-extra", "", "--spawn: YAML merged into the daemon's config.yaml, e.g. 'limits: {max_concurrent_turns: 32}'")
	fs.BoolVar(&o.keepHome, "keep-home", false, "--spawn: keep the temporary home (state.db, sessiond.stderr) and print its path")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as one JSON object")
	fs.StringVar(&o.jsonFile, "json-file", "", "also write the JSON report to this file (the text report still goes to stdout)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.DurationVar(&o.callTimeout, "call-timeout", 30*time.Second, "bound of one call; a call that takes longer counts as a timeout")
	fs.DurationVar(&o.drain, "drain", 10*time.Second, "mixed: after the window, wait this long at most for submitted turns to end")
	fs.IntVar(&o.dialWorkers, "dial-concurrency", 64, "connections opened concurrently while setting up")
	fs.IntVar(&o.createWorkers, "create-concurrency", 32, "connections creating sessions concurrently while setting up")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 60*time.Second, "--spawn: how long to wait for the daemon to be ready")
	fs.DurationVar(&o.progressPeriod, "progress", 5*time.Second, "period of the progress lines on stderr")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) { return o, fmt.Errorf(format, a...) }
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case (o.home == "") == (o.spawn == ""):
		return bad("give exactly one of --home DIR (a running daemon) or --spawn PATH/TO/sessiond")
	case o.mode != "mixed" && o.mode != "idle" && o.mode != "resume":
		return bad("--mode must be mixed, idle or resume, not %q", o.mode)
	case o.clients < 1:
		return bad("--clients must be at least 1")
	case o.duration <= 0:
		return bad("--duration must be positive")
	case o.rate < 0:
		return bad("--rate must be ≥ 0")
	case o.jitter < 0 || o.jitter >= 1:
		return bad("--jitter must be in [0, 1)")
	case o.tools < 0 || o.tools > 1:
		return bad("--tools must be in [0, 1]")
	case o.configExtra != "" && o.spawn == "":
		return bad("--config-extra applies to --spawn only")
	case o.daemons < 1:
		return bad("--daemons must be at least 1")
	case (o.daemons > 1 || o.storeDSN != "") && o.spawn == "":
		return bad("--daemons and --store-dsn apply to --spawn only (with --home, list the homes: --home DIR,DIR)")
	case o.daemons > 1 && o.storeDSN == "":
		return bad("--daemons %d needs --store-dsn: daemons share sessions only through one PostgreSQL store", o.daemons)
	case o.leaseTTL < 1:
		return bad("--lease-ttl must be at least 1")
	case o.dialWorkers < 1 || o.createWorkers < 1:
		return bad("--dial-concurrency and --create-concurrency must be at least 1")
	}
	for _, h := range strings.Split(o.home, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.homes = append(o.homes, h)
		}
	}
	if o.home != "" && len(o.homes) == 0 {
		return bad("--home names no directory")
	}
	if o.sessions < 0 {
		switch o.mode {
		case "mixed":
			o.sessions = o.clients
		case "idle":
			o.sessions = 0
		case "resume":
			o.sessions = 1000
		}
	}
	if o.mode != "idle" && o.sessions < 1 {
		return bad("--sessions must be at least 1 in mode %s", o.mode)
	}
	var err error
	if o.mix, err = parseMix(o.mixText); err != nil {
		return o, err
	}
	return o, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code. ctx ending
// (Ctrl-C) ends the measured window early; the report is still printed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "sessiond-load: %v (see --help)\n", err)
		return exitUsage
	}
	logf := func(format string, a ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, "sessiond-load: "+format+"\n", a...)
		}
	}
	failf := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sessiond-load: "+format+"\n", a...)
		return exitSetup
	}

	rep := &Report{Mode: o.mode, Clients: o.clients, Sessions: o.sessions, DurationS: o.duration.Seconds(),
		RatePerClient: o.rate, Jitter: o.jitter, ThinkMS: ms(o.think), ChunkDelayMS: ms(o.chunkDelay), ToolShare: o.tools,
		StartedAt: time.Now().UTC().Format(time.RFC3339), LoadAvgStart: loadAvg()}
	if o.mode == "mixed" {
		rep.Mix = o.mixText
	}
	if soft, _, err := raiseNoFile(); err == nil {
		rep.NoFileLimit = soft
	} else {
		logf("could not raise RLIMIT_NOFILE: %v", err)
	}

	model, err := startModel(o.think, o.chunkDelay)
	if err != nil {
		return failf("%v", err)
	}
	defer model.Close()

	var descs []descriptor
	var spawned []*spawnedDaemon
	if o.spawn != "" {
		base := baseConfig(model.URL(), o.clients)
		if o.storeDSN != "" {
			tokenDir, err := os.MkdirTemp("", "sessiond-load-token-")
			if err != nil {
				return failf("%v", err)
			}
			defer os.RemoveAll(tokenDir)
			tokenFile := filepath.Join(tokenDir, "token")
			if err := writeTokenFile(tokenFile); err != nil {
				return failf("%v", err)
			}
			base["store"] = map[string]any{"driver": "postgres", "dsn": o.storeDSN}
			base["cluster"] = map[string]any{"lease_ttl": o.leaseTTL}
			base["auth"] = map[string]any{"token_file": tokenFile}
		}
		cfg, err := mergeConfig(base, o.configExtra)
		if err != nil {
			return failf("%v", err)
		}
		for i := range o.daemons {
			logf("spawning %s (%d of %d)", o.spawn, i+1, o.daemons)
			sp, desc, err := spawn(ctx, o.spawn, cfg, o.readyTimeout)
			if sp != nil {
				spawned = append(spawned, sp)
				defer func() {
					if !o.keepHome {
						os.RemoveAll(sp.home)
					}
				}()
				defer sp.stop(30 * time.Second) // returns at once when already stopped
			}
			if err != nil {
				return failf("%v", err)
			}
			descs = append(descs, desc)
			rep.Daemon.Homes = append(rep.Daemon.Homes, sp.home)
		}
		rep.Daemon.Spawned, rep.Daemon.Home, rep.Daemon.Config = true, spawned[0].home, redactDSN(string(cfg), o.storeDSN)
	} else {
		for _, h := range o.homes {
			home, err := filepath.Abs(h)
			if err != nil {
				return failf("--home: %v", err)
			}
			desc, err := readDescriptor(home)
			if err != nil {
				return failf("%v", err)
			}
			descs = append(descs, desc)
			rep.Daemon.Homes = append(rep.Daemon.Homes, home)
		}
		rep.Daemon.Home = rep.Daemon.Homes[0]
	}
	rep.Daemon.Count = len(descs)
	if len(descs) == 1 {
		rep.Daemon.Homes = nil
	}
	desc := descs[0]
	rep.Daemon.URL = desc.URL
	for _, d := range descs {
		rep.Daemon.URLs = append(rep.Daemon.URLs, d.URL)
	}
	if len(descs) == 1 {
		rep.Daemon.URLs = nil
	}

	ctl, err := dial(ctx, desc, 10*time.Second, nil)
	if err != nil {
		return failf("cannot connect to the daemon at %s: %v", desc.URL, err)
	}
	var info protocol.DaemonInfo
	if err := ctl.Call(ctx, protocol.MethodDaemonInfo, nil, &info); err != nil {
		ctl.Close()
		return failf("daemon.info: %v", err)
	}
	ctl.Close()
	rep.Daemon.PID, rep.Daemon.Version = info.PID, info.Version

	cwd, err := os.MkdirTemp("", "sessiond-load-cwd-")
	if err != nil {
		return failf("%v", err)
	}
	defer os.RemoveAll(cwd)

	mem := startSampler(info.PID)
	r := &runner{o: o, descs: descs, st: newStats(), mem: mem, cwd: cwd, modelURL: model.URL(), pid: info.PID,
		runID: strconv.FormatInt(time.Now().UnixNano()%1e9, 36), logf: logf, rep: rep}
	runErr := r.run(ctx)
	mem.stop()
	rep.DaemonMem, rep.ClientMem = mem.daemon(), mem.client()
	rep.ModelRequests = model.ChatRequests()
	rep.LoadAvgEnd = loadAvg()

	for i, sp := range spawned {
		logf("stopping the daemon %d (SIGTERM)", i+1)
		code, killed := sp.stop(30 * time.Second)
		if rep.Daemon.ExitCode == nil || code != 0 {
			rep.Daemon.ExitCode = &code
		}
		rep.Daemon.Killed = rep.Daemon.Killed || killed
		rep.Daemon.CrashMarkers = append(rep.Daemon.CrashMarkers, sp.crashMarkers()...)
		if o.keepHome {
			logf("kept the daemon's home %s (stderr in sessiond.stderr)", sp.home)
		}
	}
	if runErr != nil {
		return failf("%v", runErr)
	}
	js, _ := json.MarshalIndent(rep, "", "  ")
	js = append(js, '\n')
	if o.jsonFile != "" {
		if err := os.WriteFile(o.jsonFile, js, 0o644); err != nil {
			fmt.Fprintf(stderr, "sessiond-load: --json-file: %v\n", err)
		}
	}
	if o.jsonOut {
		stdout.Write(js)
	} else {
		rep.writeText(stdout)
	}
	if rep.UnexpectedErrors > 0 || len(rep.Daemon.CrashMarkers) > 0 || rep.Daemon.Killed ||
		(rep.Daemon.ExitCode != nil && *rep.Daemon.ExitCode != 0) {
		return exitUnexpected
	}
	return exitOK
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
