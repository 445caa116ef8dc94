package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/tools"
)

// TestConfigEnvExclude: terminal.env_exclude defaults to
// tools.DefaultEnvExclude; a list replaces it, [] withholds nothing.
func TestConfigEnvExclude(t *testing.T) {
	load := func(yaml string) Config {
		t.Helper()
		cfg, _, err := LoadConfig(writeTemp(t, yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if got := load("").Terminal.EnvExclude; !slices.Equal(got, tools.DefaultEnvExclude) {
		t.Fatalf("default: %q", got)
	}
	if got := load("terminal: {env_exclude: [MY_*]}").Terminal.EnvExclude; !slices.Equal(got, []string{"MY_*"}) {
		t.Fatalf("a list replaces the default: %q", got)
	}
	if got := load("terminal: {env_exclude: []}").Terminal.EnvExclude; len(got) != 0 {
		t.Fatalf("[] withholds nothing: %q", got)
	}
	if _, _, err := LoadConfig(writeTemp(t, "terminal: {env_exclude: 3}")); err == nil {
		t.Fatal("a number for env_exclude was accepted")
	}
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigDurationsAreBounded(t *testing.T) {
	for _, yaml := range []string{"storage: {checkpoint_interval: 18446744074}", "storage: {checkpoint_interval: 86401}", "storage: {busy_timeout: 86401000}"} {
		if _, _, err := LoadConfig(writeTemp(t, yaml)); err == nil {
			t.Errorf("%s was accepted", yaml)
		}
	}
	if _, _, err := LoadConfig(writeTemp(t, "storage: {checkpoint_interval: 86400, busy_timeout: 60000}")); err != nil {
		t.Errorf("a day is allowed: %v", err)
	}
}

func TestConfigMaxTimeout(t *testing.T) {
	for yaml, want := range map[string]string{
		"terminal: {max_timeout: -1}":                "terminal.max_timeout: must be positive",
		"terminal: {timeout: 300, max_timeout: 200}": "terminal.max_timeout: 200 is below terminal.timeout (300)",
		"terminal: {max_timeout: 86401}":             "terminal.max_timeout: at most a day",
	} {
		if _, _, err := LoadConfig(writeTemp(t, yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", yaml, err, want)
		}
	}
	c, _, err := LoadConfig(writeTemp(t, "terminal: {max_timeout: 3600}"))
	if err != nil || c.Terminal.MaxTimeout != 3600 {
		t.Fatalf("max_timeout 3600: %+v, %v", c.Terminal, err)
	}
}

// TestMetricsListenIsLoopbackOnly: metrics_listen serves /metrics without
// the token, so only loopback addresses are accepted, with an error naming
// the key; unset means no such listener.
func TestMetricsListenIsLoopbackOnly(t *testing.T) {
	for yaml, want := range map[string]string{
		"metrics_listen: 0.0.0.0:9464":  `metrics_listen: "0.0.0.0:9464" is not a loopback address`,
		"metrics_listen: 10.1.2.3:9464": `metrics_listen: "10.1.2.3:9464" is not a loopback address`,
		"metrics_listen: localhost":     "metrics_listen: address localhost: missing port in address",
	} {
		if _, _, err := LoadConfig(writeTemp(t, yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", yaml, err, want)
		}
	}
	for _, yaml := range []string{"", "metrics_listen: 127.0.0.1:9464", "metrics_listen: '[::1]:0'", "metrics_listen: localhost:9464"} {
		if _, _, err := LoadConfig(writeTemp(t, yaml)); err != nil {
			t.Errorf("%q refused: %v", yaml, err)
		}
	}
}

// TestOverrideListen: --listen replaces listen with the same check, and
// names the flag in its error.
func TestOverrideListen(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.overrideListen(""); err != nil || cfg.Listen != "127.0.0.1:0" {
		t.Fatalf("empty --listen: %v %q", err, cfg.Listen)
	}
	if err := cfg.overrideListen("127.0.0.1:8765"); err != nil || cfg.Listen != "127.0.0.1:8765" {
		t.Fatalf("--listen 127.0.0.1:8765: %v %q", err, cfg.Listen)
	}
	if err := cfg.overrideListen("192.168.1.2:80"); err == nil || !strings.HasPrefix(err.Error(), `--listen: "192.168.1.2:80" is not a loopback address`) || cfg.Listen != "127.0.0.1:8765" {
		t.Fatalf("a LAN --listen: %v, listen now %q", err, cfg.Listen)
	}
}

// mcp.servers: each entry is checked and errors name its key; unknown keys
// inside an entry are warned about; network and auto_approve are kept.
func TestConfigMCPServers(t *testing.T) {
	cfg, warnings, err := LoadConfig(writeTemp(t, `mcp:
  idle_timeout: 30
  servers:
    fs: {command: npx, args: [-y, "@modelcontextprotocol/server-filesystem", /srv], env: {A: b}, network: true, auto_approve: [read_file], colour: red}
    web: {url: "https://mcp.example/mcp", headers: {Authorization: "Bearer x"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	fs := cfg.MCP.Servers["fs"]
	if fs.Command != "npx" || len(fs.Args) != 3 || fs.Env["A"] != "b" || !fs.Network || fs.AutoApprove[0] != "read_file" ||
		cfg.MCP.Servers["web"].URL != "https://mcp.example/mcp" || cfg.MCP.IdleTimeout != 30 || cfg.MCP.StartTimeout != 30 {
		t.Fatalf("mcp config %+v", cfg.MCP)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `"mcp.servers.fs.colour"`) {
		t.Errorf("warnings %q", warnings)
	}
	for yaml, want := range map[string]string{
		"mcp: {servers: {a b: {command: x}}}":                     `mcp.servers.a b.name`,
		"mcp: {servers: {x__y: {command: x}}}":                    `mcp.servers.x__y.name`,
		"mcp: {servers: {x: {}}}":                                 `mcp.servers.x: server "x" needs a command`,
		"mcp: {servers: {x: {command: a, url: http://h/}}}":       `has both a command and a url`,
		"mcp: {servers: {x: {url: ftp://h/}}}":                    `mcp.servers.x.url`,
		"mcp: {servers: {x: {command: a, auto_approve: ['']}}}":   `mcp.servers.x.auto_approve[0]`,
		"mcp: {servers: {x: {command: a, headers: {A: b}}}}":      `mcp.servers.x.headers`,
		"mcp: {idle_timeout: 0}":                                  `mcp.idle_timeout: must be positive`,
		"mcp: {call_timeout: 90000}":                              `mcp.call_timeout: at most a day`,
		"mcp: {servers: {x: {command: a, env: {'1A': b}}}}":       `mcp.servers.x.env`,
		"mcp: {servers: {x: {command: a, cwd: relative/dir}}}":    `mcp.servers.x.cwd`,
		"mcp: {servers: {x: {command: a, network: maybe}}}":       `mcp.servers.x.network`,
		"mcp: {servers: {x: {url: 'http://h/', args: [a]}}}":      `args, env and cwd are for stdio servers`,
		"mcp: {servers: [x]}":                                     `mcp.servers`,
		"mcp: {max_message_bytes: -1}":                            `mcp.max_message_bytes: must be positive`,
		"mcp: {servers: {x: {command: a, auto_approve: tool_a}}}": `mcp.servers.x.auto_approve`,
	} {
		if _, _, err := LoadConfig(writeTemp(t, yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want it to name %q", yaml, err, want)
		}
	}
}
