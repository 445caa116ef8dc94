package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	fixtures.CleanupBinaries()
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// runLoad runs the tool in-process with args and decodes its --json report.
func runLoad(t *testing.T, args ...string) (Report, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append(args, "--json", "--quiet"), &stdout, &stderr)
	var rep Report
	if code == exitOK || code == exitUnexpected {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("report is not JSON (%v):\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
	}
	return rep, code, stderr.String()
}

// checkDaemon checks the daemon part of a report; spawned says whether the
// tool started (and stopped) the daemon itself.
func checkDaemon(t *testing.T, rep Report, spawned bool) {
	t.Helper()
	d := rep.Daemon
	if d.Spawned != spawned || d.PID == 0 || len(d.CrashMarkers) > 0 ||
		(spawned && (d.ExitCode == nil || *d.ExitCode != 0 || d.Killed)) {
		t.Errorf("daemon: %+v (exit %v)", d, d.ExitCode)
	}
	// Plausible RSS: a Go daemon with SQLite is more than 5 MiB and, in
	// these small runs, well under 1 GiB (also under -race).
	for name, m := range map[string]MemReport{"daemon": rep.DaemonMem, "client": rep.ClientMem} {
		if m.Last.RSSBytes < 5<<20 || m.Last.RSSBytes > 1<<30 || m.Last.HWMBytes < m.Last.RSSBytes || m.Samples == 0 {
			t.Errorf("%s memory not plausible: %+v", name, m)
		}
	}
}

func method(rep Report, name string) MethodReport {
	for _, m := range rep.Methods {
		if m.Method == name {
			return m
		}
	}
	return MethodReport{}
}

// TestMixedAgainstSpawnedDaemon runs the default workload for 2 s with a
// few clients against a real sessiond it spawns.
func TestMixedAgainstSpawnedDaemon(t *testing.T) {
	t.Parallel()
	bin := fixtures.BuildBinaries(t)
	// A relative --spawn path works although the daemon runs in its home.
	wd, _ := os.Getwd()
	if rel, err := filepath.Rel(wd, bin); err == nil {
		bin = rel
	}
	rep, code, stderr := runLoad(t, "--spawn", bin, "--clients", "4", "--duration", "2s", "--rate", "10",
		"--tools", "0.3", "--mix", "submit=50,resume=20,duplicate=20,create=5,info=3,list=2",
		"--config-extra", "limits: {max_in_flight: 32}\nagent: {max_iterations: 5}")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nreport: %+v", code, stderr, rep)
	}
	if rep.TotalOK == 0 || rep.ThroughputPerS <= 0 || rep.ElapsedS <= 0 {
		t.Errorf("no throughput: %+v", rep)
	}
	if rep.UnexpectedErrors != 0 || len(rep.CheckFailures) != 0 {
		t.Errorf("unexpected errors %d: rpc %+v transport %+v checks %+v", rep.UnexpectedErrors, rep.RPCErrors, rep.TransportErrors, rep.CheckFailures)
	}
	sub := method(rep, "prompt.submit")
	if sub.OK == 0 || sub.LatencyMS.P50MS <= 0 || sub.LatencyMS.P99MS < sub.LatencyMS.P50MS || sub.LatencyMS.MaxMS < sub.LatencyMS.P99MS {
		t.Errorf("prompt.submit figures: %+v", sub)
	}
	if method(rep, "session.resume").OK == 0 {
		t.Errorf("no session.resume: %+v", rep.Methods)
	}
	if rep.Turns.Submitted == 0 || rep.Turns.Completed == 0 || rep.Turns.Failed != 0 {
		t.Errorf("turns: %+v", rep.Turns)
	}
	if rep.ModelRequests < int(rep.Turns.Completed) {
		t.Errorf("fake model answered %d requests for %d turns", rep.ModelRequests, rep.Turns.Completed)
	}
	if !strings.Contains(rep.Daemon.Config, "max_in_flight: 32") || !strings.Contains(rep.Daemon.Config, "max_connections") {
		t.Errorf("config-extra not merged into the base config:\n%s", rep.Daemon.Config)
	}
	checkDaemon(t, rep, true)
}

// TestIdleAndResumeModesOnARunningDaemon targets a daemon started by the
// harness (--home): its sessions use the tool's fake model all the same.
func TestIdleAndResumeModesOnARunningDaemon(t *testing.T) {
	t.Parallel()
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{})
	rep, code, stderr := runLoad(t, "--home", d.Home, "--mode", "idle", "--clients", "50", "--sessions", "5", "--duration", "300ms")
	if code != exitOK {
		t.Fatalf("idle: exit %d; stderr:\n%s", code, stderr)
	}
	if rep.Idle == nil || rep.Idle.Open != 50 || rep.Idle.AliveAtEnd != 50 || rep.Idle.SteadyRSSBytes <= 0 {
		t.Errorf("idle report: %+v", rep.Idle)
	}
	if m := method(rep, "session.resume"); m.OK != 50 {
		t.Errorf("idle: session.resume %+v", m)
	}
	checkDaemon(t, rep, false)

	rep, code, stderr = runLoad(t, "--home", d.Home, "--mode", "resume", "--sessions", "200", "--clients", "2",
		"--rate", "0", "--duration", "500ms")
	if code != exitOK {
		t.Fatalf("resume: exit %d; stderr:\n%s", code, stderr)
	}
	if rep.Setup.SessionsCreated != 200 || method(rep, "session.resume").OK == 0 || rep.UnexpectedErrors != 0 {
		t.Errorf("resume report: setup %+v methods %+v errors %d", rep.Setup, rep.Methods, rep.UnexpectedErrors)
	}
	checkDaemon(t, rep, false)
	if rep.Daemon.PID != d.PID() {
		t.Errorf("report names pid %d, the daemon is %d", rep.Daemon.PID, d.PID())
	}
	d.SIGTERM(t)
}

func TestUnreachableHomeAndBadFlags(t *testing.T) {
	if _, code, stderr := runLoad(t, "--home", t.TempDir()); code != exitSetup || !strings.Contains(stderr, "no daemon running") {
		t.Errorf("empty home: exit %d, stderr %q", code, stderr)
	}
	for _, args := range [][]string{
		{},                                  // neither --home nor --spawn
		{"--home", "x", "--spawn", "y"},     // both
		{"--spawn", "x", "--mode", "burst"}, // unknown mode
		{"--spawn", "x", "--mix", "submit=1,fly=2"},
		{"--spawn", "x", "--jitter", "1"},
		{"--home", "x", "--config-extra", "limits: {}"},
		{"--spawn", "x", "--daemons", "2"},                // several daemons need a shared store
		{"--spawn", "x", "--daemons", "0"},                // at least one
		{"--home", "x", "--store-dsn", "postgres://h/db"}, // --spawn only
		{"--home", "x", "--daemons", "2"},                 // --spawn only: list the homes instead
		{"--spawn", "x", "--store-dsn", "postgres://h/db", "--lease-ttl", "0"},
		{"--home", ","}, // no directory
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %q", args, code, exitUsage, errOut.String())
		}
	}
}

func TestMergeConfig(t *testing.T) {
	base := baseConfig("http://127.0.0.1:1/v1", 10000)
	out, err := mergeConfig(base, "limits: {max_concurrent_turns: 32}\napprovals: {mode: manual}")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model     map[string]any `yaml:"model"`
		Approvals map[string]any `yaml:"approvals"`
		Limits    map[string]int `yaml:"limits"`
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Limits["max_connections"] != 10256 || got.Limits["max_concurrent_turns"] != 32 ||
		got.Approvals["mode"] != "manual" || got.Model["base_url"] != "http://127.0.0.1:1/v1" {
		t.Errorf("merged config:\n%s", out)
	}
	if _, err := mergeConfig(baseConfig("u", 1), "limits: [1"); err == nil {
		t.Error("bad YAML accepted")
	}
}

// TestMixedOverDaemonsSharingPostgreSQL spawns two daemons on one
// PostgreSQL database (issue 17): clients are dealt over both, sessions
// created through one are used through the other, every turn completes and
// the report names both daemons; the DSN's password never shows.
func TestMixedOverDaemonsSharingPostgreSQL(t *testing.T) {
	bin := fixtures.BuildBinaries(t)
	dsn := pgtest.DSN(t)
	rep, code, stderr := runLoad(t, "--spawn", bin, "--daemons", "2", "--store-dsn", dsn, "--lease-ttl", "3",
		"--clients", "4", "--duration", "2s", "--rate", "10", "--mix", "submit=60,resume=25,duplicate=10,create=5")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nunexpected errors %d: rpc %+v transport %+v checks %+v; turns %+v; daemons %+v (exit %v)",
			code, stderr, rep.UnexpectedErrors, rep.RPCErrors, rep.TransportErrors, rep.CheckFailures, rep.Turns, rep.Daemon, rep.Daemon.ExitCode)
	}
	if rep.Daemon.Count != 2 || len(rep.Daemon.URLs) != 2 || rep.Daemon.URLs[0] == rep.Daemon.URLs[1] || len(rep.Daemon.Homes) != 2 {
		t.Errorf("daemons: %+v", rep.Daemon)
	}
	if !strings.Contains(rep.Daemon.Config, "driver: postgres") || !strings.Contains(rep.Daemon.Config, "lease_ttl: 3") ||
		!strings.Contains(rep.Daemon.Config, "token_file:") {
		t.Errorf("config of the spawned daemons:\n%s", rep.Daemon.Config)
	}
	if rep.UnexpectedErrors != 0 || rep.Turns.Submitted == 0 || rep.Turns.Completed != rep.Turns.Submitted || rep.Turns.Failed != 0 {
		t.Errorf("errors %d (rpc %+v, transport %+v, checks %+v), turns %+v", rep.UnexpectedErrors, rep.RPCErrors,
			rep.TransportErrors, rep.CheckFailures, rep.Turns)
	}
	checkDaemon(t, rep, true)
}

func TestRedactDSN(t *testing.T) {
	dsn := "postgres://app:s3cret@db:5432/x?sslmode=disable"
	if got := redactDSN("dsn: "+dsn+"\n", dsn); strings.Contains(got, "s3cret") || !strings.Contains(got, "app:xxxxx@db:5432") {
		t.Errorf("redacted: %q", got)
	}
	if got := redactDSN("dsn: postgres://db/x", "postgres://db/x"); got != "dsn: postgres://db/x" {
		t.Errorf("no password: %q", got)
	}
}
