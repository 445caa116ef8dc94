package daemon

import (
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/sandbox"
)

// TestConfigSandbox: sandbox defaults to workspace-write without network;
// bad values are errors naming the key.
func TestConfigSandbox(t *testing.T) {
	cfg, _, err := LoadConfig(writeTemp(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Sandbox.Policy(); p.Mode != sandbox.ModeWorkspaceWrite || p.Network || len(p.WritableRoots) != 0 {
		t.Fatalf("default sandbox = %+v", p)
	}
	cfg, _, err = LoadConfig(writeTemp(t, "sandbox: {mode: read-only, network: true, writable_roots: [/srv/cache/]}\nterminal: {env_passthrough: [GOPATH]}"))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Sandbox.Policy(); p.Mode != sandbox.ModeReadOnly || !p.Network || !slices.Equal(p.WritableRoots, []string{"/srv/cache"}) {
		t.Fatalf("sandbox = %+v", p)
	}
	if !slices.Equal(cfg.Terminal.EnvPassthrough, []string{"GOPATH"}) {
		t.Fatalf("env_passthrough = %q", cfg.Terminal.EnvPassthrough)
	}
	for yaml, want := range map[string]string{
		"sandbox: {mode: strict}":                "sandbox.mode: must be workspace-write, read-only or off",
		"sandbox: {writable_roots: [rel/dir]}":   "sandbox.writable_roots[0]: must be an absolute path",
		"sandbox: {network: maybe}":              "sandbox.network",
		"sandbox: {writable_roots: /not/a/list}": "sandbox.writable_roots",
		"terminal: {env_passthrough: 7}":         "terminal.env_passthrough",
	} {
		if _, _, err := LoadConfig(writeTemp(t, yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", yaml, err, want)
		}
	}
}

// TestPolicyNarrow: session.create may narrow the configured sandbox,
// never widen it.
func TestPolicyNarrow(t *testing.T) {
	base := sandbox.Policy{Mode: sandbox.ModeWorkspaceWrite, Network: false, WritableRoots: []string{"/srv"}}
	yes, no := true, false
	if p, err := base.Narrow(sandbox.ModeReadOnly, &no, []string{"/srv/a"}); err != nil || p.Mode != sandbox.ModeReadOnly || !slices.Equal(p.WritableRoots, []string{"/srv/a"}) {
		t.Fatalf("narrow: %+v %v", p, err)
	}
	if p, err := base.Narrow("", nil, nil); err != nil || p.Mode != base.Mode || !slices.Equal(p.WritableRoots, base.WritableRoots) {
		t.Fatalf("inherit: %+v %v", p, err)
	}
	for name, f := range map[string]func() error{
		"mode off":     func() error { _, err := base.Narrow(sandbox.ModeOff, nil, nil); return err },
		"network on":   func() error { _, err := base.Narrow("", &yes, nil); return err },
		"other root":   func() error { _, err := base.Narrow("", nil, []string{"/home"}); return err },
		"prefix trick": func() error { _, err := base.Narrow("", nil, []string{"/srvx"}); return err },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "never widen") {
			t.Errorf("%s: err = %v, want a widening error", name, err)
		}
	}
	ro := sandbox.Policy{Mode: sandbox.ModeReadOnly, WritableRoots: []string{}}
	if _, err := ro.Narrow(sandbox.ModeWorkspaceWrite, nil, nil); err == nil {
		t.Error("read-only widened to workspace-write")
	}
}

// TestSessionWithoutStoredSandbox: a session row without a sandbox (made
// before migration 0002) takes the configured one; daemon.info reports
// the configured sandbox as available on this kernel.
func TestSessionWithoutStoredSandbox(t *testing.T) {
	d := startTest(t, "sandbox: {mode: read-only}")
	id := mustSession(t, d)
	snap, err := d.snapshot(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Sandbox.Mode != "read-only" || snap.Sandbox.Network || !snap.Sandbox.Available {
		t.Fatalf("snapshot sandbox = %+v", snap.Sandbox)
	}
	if info := d.sandboxInfo(d.cfg.Sandbox.Policy()); !info.Available || info.Mode != "read-only" || info.Reason != "" {
		t.Fatalf("daemon.info sandbox = %+v", info)
	}
}
