package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/tools"
	"go.yaml.in/yaml/v3"
)

// Config is config.yaml (PROTOCOL.md section 8). Every key is optional;
// unknown keys are warned about once and ignored; a value of the wrong type
// is an error naming its key.
type Config struct {
	// Listen is the TCP address of the WebSocket server; it must be a
	// loopback address. Default 127.0.0.1:0 (an ephemeral port).
	Listen string `yaml:"listen"`
	// MetricsListen, when set, is a loopback address where GET /metrics is
	// served without the token (for a local Prometheus). Default: none;
	// /metrics on Listen always needs the token.
	MetricsListen string          `yaml:"metrics_listen"`
	Model         ModelConfig     `yaml:"model"`
	Approvals     ApprovalsConfig `yaml:"approvals"`
	Agent         AgentConfig     `yaml:"agent"`
	Terminal      TerminalConfig  `yaml:"terminal"`
	Limits        LimitsConfig    `yaml:"limits"`
	Storage       StorageConfig   `yaml:"storage"`
	Store         StoreConfig     `yaml:"store"`
	Sandbox       SandboxConfig   `yaml:"sandbox"`
	Cluster       ClusterConfig   `yaml:"cluster"`
	// MCP declares the MCP servers every new session gets and how they
	// run (PROTOCOL.md 10.1, docs/protocol.md "MCP servers").
	MCP MCPConfig `yaml:"mcp"`
	// AllowedOrigins lists Origin header values that may open /rpc
	// (browser-based clients). Requests with any other Origin get 403.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHosts lists extra Host header names accepted besides loopback
	// addresses and "localhost" (anti DNS-rebinding).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// Auth chooses the daemon token (auth.go): token_file for daemons
	// sharing a store.
	Auth AuthConfig `yaml:"auth"`
}

// ModelConfig is the default model wire for new sessions.
type ModelConfig struct {
	Provider string `yaml:"provider"` // openai (default) or custom
	Default  string `yaml:"default"`  // model name used when session.create gives none
	// Choices are more model names offered to pickers (daemon.info's
	// models, the ACP bridge's model option), after Default.
	Choices []string `yaml:"choices"`
	BaseURL string   `yaml:"base_url"` // env OPENAI_BASE_URL when empty
	APIKey  string   `yaml:"api_key"`  // env OPENAI_API_KEY when empty
	// ConnectTimeout and IdleTimeout are in seconds: the wait for response
	// headers, and the longest gap between streamed chunks.
	ConnectTimeout int `yaml:"connect_timeout"`
	IdleTimeout    int `yaml:"idle_timeout"`
}

// ApprovalsConfig gates dangerous terminal commands.
type ApprovalsConfig struct {
	Mode    string `yaml:"mode"`    // manual (default) | strict | off
	Timeout int    `yaml:"timeout"` // seconds until an unanswered approval denies; default 120
}

// AgentConfig bounds one turn.
type AgentConfig struct {
	ClarifyTimeout int `yaml:"clarify_timeout"` // seconds; default 120
	MaxIterations  int `yaml:"max_iterations"`  // model calls per turn; default 50
}

// TerminalConfig configures the terminal tool.
type TerminalConfig struct {
	Cwd     string `yaml:"cwd"`     // default cwd of session.create when none is given
	Timeout int    `yaml:"timeout"` // seconds per command; default 180
	// MaxTimeout is the longest timeout, in seconds, a terminal call may
	// ask for with its "timeout" argument (a larger one is refused with a
	// tool error the model reads). 0 (the default) means the larger of 600
	// and Timeout; at most a day.
	MaxTimeout  int `yaml:"max_timeout"`
	OutputLimit int `yaml:"output_limit"` // bytes kept per command result; default 50000
	// EnvExclude lists glob patterns (case-insensitive) of environment
	// variables withheld from commands; default tools.DefaultEnvExclude
	// (*KEY*, *SECRET*, *TOKEN*, *PASSWORD*, *CREDENTIAL*); [] passes all.
	EnvExclude []string `yaml:"env_exclude"`
	// EnvPassthrough names (or globs, case-sensitive) variables of the
	// daemon's environment passed to commands besides the allowlist
	// (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TZ, TMPDIR);
	// these pass even when they look like credentials. Default none.
	EnvPassthrough []string `yaml:"env_passthrough"`
}

// SandboxConfig is the sandbox of new sessions (see package sandbox).
type SandboxConfig struct {
	// Mode is workspace-write (default), read-only or off.
	Mode string `yaml:"mode"`
	// Network allows TCP and UDP in commands; default false.
	Network bool `yaml:"network"`
	// WritableRoots are absolute directories writable besides the cwd.
	WritableRoots []string `yaml:"writable_roots"`
	// ReadableRoots are absolute paths readable besides the system trees,
	// the user's home and $PATH: a credential store of the home (~/.ssh,
	// ~/.aws, …, see sandbox.CredentialStores) is in the view only when
	// named here. Applied to every session at each command (a session
	// cannot change it).
	ReadableRoots []string `yaml:"readable_roots"`
}

// Policy returns the sandbox policy the config describes.
func (c SandboxConfig) Policy() sandbox.Policy {
	roots := []string{}
	for _, r := range c.WritableRoots {
		roots = append(roots, sandbox.RealPath(r)) // real paths: see sandbox.ErrSymlinkSwapped
	}
	var readable []string
	for _, r := range c.ReadableRoots {
		readable = append(readable, sandbox.RealPath(r))
	}
	p := sandbox.Policy{Mode: sandbox.Mode(c.Mode), Network: c.Network, WritableRoots: roots, ReadableRoots: readable}
	if p.Mode == sandbox.ModeOff {
		p.Network = true
	}
	return p
}

// MCPConfig is config.yaml's mcp: the daemon-wide servers (frozen into
// each session at creation) and the servers' lifetimes; durations in
// seconds.
type MCPConfig struct {
	// Servers by name ([A-Za-z0-9_-]{1,32}, without "__").
	Servers map[string]MCPServerConfig `yaml:"servers"`
	// IdleTimeout: a session's servers stop after it ran no turn for this
	// long; default 600.
	IdleTimeout int `yaml:"idle_timeout"`
	// StartTimeout bounds a server's start (process, initialize, tool
	// list); default 30.
	StartTimeout int `yaml:"start_timeout"`
	// CallTimeout bounds one tools/call; default 600.
	CallTimeout int `yaml:"call_timeout"`
	// MaxBackoff caps the wait before a failed server is restarted (1 s,
	// doubling); default 60.
	MaxBackoff int `yaml:"max_backoff"`
	// MaxMessageBytes bounds one message from a stdio server (a larger one
	// fails the server); default 33554432 (32 MiB).
	MaxMessageBytes int `yaml:"max_message_bytes"`
}

// MCPServerConfig is one server of config.yaml: stdio (command, args, env,
// cwd) or streamable HTTP (url, headers). Network gives a stdio server TCP
// and UDP in its sandbox (default false); AutoApprove lists its tools that
// run without approval in manual and strict mode.
type MCPServerConfig struct {
	Command     string            `yaml:"command"`
	Args        []string          `yaml:"args"`
	Env         map[string]string `yaml:"env"`
	Cwd         string            `yaml:"cwd"`
	URL         string            `yaml:"url"`
	Headers     map[string]string `yaml:"headers"`
	Network     bool              `yaml:"network"`
	AutoApprove []string          `yaml:"auto_approve"`
}

// Params is the server's wire form (name given by the map's key).
func (m MCPServerConfig) Params(name string) protocol.MCPServerParams {
	p := protocol.MCPServerParams{Name: name, Command: m.Command, Args: m.Args, Env: m.Env, Cwd: m.Cwd, URL: m.URL,
		Headers: m.Headers, AutoApprove: m.AutoApprove}
	if m.Network {
		n := true
		p.Network = &n
	}
	return p
}

// ServerParams returns the configured servers by name in wire form.
func (c MCPConfig) ServerParams() map[string]protocol.MCPServerParams {
	out := make(map[string]protocol.MCPServerParams, len(c.Servers))
	for n, s := range c.Servers {
		out[n] = s.Params(n)
	}
	return out
}

// StorageConfig tunes state.db.
type StorageConfig struct {
	// BusyTimeout is SQLite's busy timeout in milliseconds: how long a
	// write waits for a lock held by another process before the request
	// fails with storage_unavailable. Default 5000.
	BusyTimeout int `yaml:"busy_timeout"`
	// CheckpointInterval is how often, in seconds, a passive WAL checkpoint
	// checks that state.db can be written (daemon.info storage). Default 30.
	CheckpointInterval int `yaml:"checkpoint_interval"`
}

// ClusterConfig is the daemon's part in a cluster of daemons sharing one
// store (docs/protocol.md, "Cluster").
type ClusterConfig struct {
	// LeaseTTL, in seconds, is how long after its last heartbeat another
	// daemon may take this daemon's sessions (measured on the database's
	// clock). Heartbeats run every LeaseTTL/3; a daemon that cannot renew
	// its lease for 3/4 of it stops its turns and kills their commands
	// itself. Default 10, at most 3600.
	LeaseTTL int `yaml:"lease_ttl"`
	// Label names the storage this daemon's session cwds live on. Empty
	// (the default): every daemon sees every cwd, and any daemon may run
	// any session. Set: sessions created here are pinned to the label and
	// only daemons with the same label run them.
	Label string `yaml:"label"`
}

// StoreConfig chooses the database: SQLite (default: state.db in the home,
// nothing to set up) or PostgreSQL (a database named by a DSN, which several
// daemons may share). A DSN alone means driver postgres. SESSIOND_STORE_DSN
// fills dsn when the file leaves it empty; sessiond --store-dsn overrides
// both.
type StoreConfig struct {
	Driver string `yaml:"driver"` // sqlite (default) | postgres
	// DSN is the PostgreSQL URL, postgres://USER:PASSWORD@HOST:PORT/DBNAME
	// (?sslmode=..., ?host=/socket/dir). Logs and daemon.info never show
	// its password.
	DSN string `yaml:"dsn"`
	// MaxConns sizes the PostgreSQL connection pool (write transactions
	// and reads; the LISTEN connection and the lease's reserved one come
	// on top), 1-1000. 0 (the default): 16. The DSN's pool_max_conns
	// parameter, when present, wins. Refused with driver sqlite.
	MaxConns int `yaml:"max_conns"`
}

// StoreOptions is the store's driver and DSN from c.Store (validated).
func (c *Config) StoreOptions() (store.Driver, string) {
	d, _ := store.ParseDriver(c.Store.Driver)
	if c.Store.Driver == "" && c.Store.DSN != "" {
		d = store.Postgres
	}
	return d, c.Store.DSN
}

// LimitsConfig bounds the daemon's resources.
type LimitsConfig struct {
	MaxConcurrentTurns  int   `yaml:"max_concurrent_turns"`   // default 8
	MaxMessageBytes     int64 `yaml:"max_message_bytes"`      // WebSocket frame limit; default 4 MiB
	MaxInFlight         int   `yaml:"max_in_flight"`          // concurrent requests per connection; default 64
	SendQueue           int   `yaml:"send_queue"`             // queued notifications per connection; default 1024
	MaxConnections      int   `yaml:"max_connections"`        // open WebSocket connections; more are closed with 1013; default 4096
	MaxInputBytes       int   `yaml:"max_input_bytes"`        // prompt.submit text plus attachments; default 1 MiB
	MaxQueuedPerSession int   `yaml:"max_queued_per_session"` // queued inputs per session; more are refused overloaded; default 1000
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() Config {
	return Config{
		Listen:    "127.0.0.1:0",
		Model:     ModelConfig{Provider: "openai", ConnectTimeout: 30, IdleTimeout: 120},
		Approvals: ApprovalsConfig{Mode: "manual", Timeout: 120},
		Agent:     AgentConfig{ClarifyTimeout: 120, MaxIterations: 50},
		Terminal:  TerminalConfig{Timeout: 180, OutputLimit: 50000, EnvExclude: slices.Clone(tools.DefaultEnvExclude)},
		Limits: LimitsConfig{MaxConcurrentTurns: 8, MaxMessageBytes: 4 << 20, MaxInFlight: 64, SendQueue: 1024,
			MaxConnections: 4096, MaxInputBytes: 1 << 20, MaxQueuedPerSession: 1000},
		Storage: StorageConfig{BusyTimeout: 5000, CheckpointInterval: 30},
		Sandbox: SandboxConfig{Mode: string(sandbox.ModeWorkspaceWrite), WritableRoots: []string{}},
		Cluster: ClusterConfig{LeaseTTL: 10},
		MCP:     MCPConfig{IdleTimeout: 600, StartTimeout: 30, CallTimeout: 600, MaxBackoff: 60, MaxMessageBytes: 32 << 20},
	}
}

// LoadConfig reads path over DefaultConfig. A missing file is not an
// error. It returns the warnings about unknown keys (one per key, with its
// dotted path) and an error naming the key for a wrong type or an invalid
// value. OPENAI_BASE_URL and OPENAI_API_KEY fill model.base_url and
// model.api_key when the file leaves them empty.
func LoadConfig(path string) (Config, []string, error) {
	cfg := DefaultConfig()
	var warnings []string
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return cfg, nil, fmt.Errorf("config %s: %w", path, err)
	default:
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return cfg, nil, fmt.Errorf("config %s: %w", path, err)
		}
		if len(root.Content) > 0 {
			if err := decodeNode(root.Content[0], reflect.ValueOf(&cfg).Elem(), "", &warnings); err != nil {
				return cfg, warnings, fmt.Errorf("config %s: %w", path, err)
			}
		}
	}
	if cfg.Model.BaseURL == "" {
		cfg.Model.BaseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if cfg.Model.APIKey == "" {
		cfg.Model.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if cfg.Store.DSN == "" {
		cfg.Store.DSN = os.Getenv("SESSIOND_STORE_DSN")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, warnings, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, warnings, nil
}

// decodeNode decodes a mapping node into the struct v field by field, so
// that errors name the key and unknown keys become warnings.
func decodeNode(n *yaml.Node, v reflect.Value, prefix string, warnings *[]string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if v.Kind() == reflect.Map && v.Type().Elem().Kind() == reflect.Struct && v.Type().Key().Kind() == reflect.String && n.Kind == yaml.MappingNode {
		// A mapping of names to entries (mcp.servers): each entry decoded
		// like a section, so its unknown keys are warned about too.
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			e := reflect.New(v.Type().Elem()).Elem()
			if err := decodeNode(n.Content[i+1], e, prefix+key+".", warnings); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(key), e)
		}
		return nil
	}
	if v.Kind() != reflect.Struct {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			return fmt.Errorf("%s: %s", strings.TrimSuffix(prefix, "."), typeError(n, v))
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		name := strings.TrimSuffix(prefix, ".")
		if name == "" {
			return fmt.Errorf("line %d: the file must be a mapping of keys", n.Line)
		}
		return fmt.Errorf("%s: line %d: must be a mapping of keys", name, n.Line)
	}
	fields := map[string]reflect.Value{}
	for i := 0; i < v.NumField(); i++ {
		tag := strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			fields[tag] = v.Field(i)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		f, ok := fields[key]
		if !ok {
			*warnings = append(*warnings, fmt.Sprintf("unknown config key %q (line %d) ignored", prefix+key, n.Content[i].Line))
			continue
		}
		if err := decodeNode(val, f, prefix+key+".", warnings); err != nil {
			return err
		}
	}
	return nil
}

func typeError(n *yaml.Node, v reflect.Value) string {
	want := v.Kind().String()
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		want = "an integer"
	case reflect.String:
		want = "a string"
	case reflect.Slice:
		want = "a list"
	case reflect.Bool:
		want = "a boolean"
	}
	return fmt.Sprintf("line %d: must be %s, got %q", n.Line, want, n.Value)
}

// Validate checks values (not types): modes, positive limits, a loopback
// listen address. Errors name the key.
func (c *Config) Validate() error {
	switch c.Approvals.Mode {
	case "manual", "strict", "off":
	default:
		return fmt.Errorf("approvals.mode: must be manual, strict or off, got %q", c.Approvals.Mode)
	}
	if err := c.Sandbox.Policy().Validate(); err != nil {
		return fmt.Errorf("sandbox.%w", err)
	}
	if err := c.Store.validate(); err != nil {
		return err
	}
	switch c.Model.Provider {
	case "openai", "custom":
	default:
		return fmt.Errorf("model.provider: must be openai or custom, got %q", c.Model.Provider)
	}
	positive := map[string]int64{
		"approvals.timeout": int64(c.Approvals.Timeout), "agent.clarify_timeout": int64(c.Agent.ClarifyTimeout),
		"agent.max_iterations": int64(c.Agent.MaxIterations), "terminal.timeout": int64(c.Terminal.Timeout),
		"terminal.output_limit": int64(c.Terminal.OutputLimit), "limits.max_concurrent_turns": int64(c.Limits.MaxConcurrentTurns),
		"limits.max_message_bytes": c.Limits.MaxMessageBytes, "limits.max_in_flight": int64(c.Limits.MaxInFlight),
		"limits.send_queue": int64(c.Limits.SendQueue), "model.connect_timeout": int64(c.Model.ConnectTimeout),
		"model.idle_timeout": int64(c.Model.IdleTimeout), "limits.max_connections": int64(c.Limits.MaxConnections),
		"limits.max_input_bytes": int64(c.Limits.MaxInputBytes), "limits.max_queued_per_session": int64(c.Limits.MaxQueuedPerSession),
		"storage.busy_timeout": int64(c.Storage.BusyTimeout), "storage.checkpoint_interval": int64(c.Storage.CheckpointInterval),
		"cluster.lease_ttl": int64(c.Cluster.LeaseTTL), "mcp.idle_timeout": int64(c.MCP.IdleTimeout),
		"mcp.start_timeout": int64(c.MCP.StartTimeout), "mcp.call_timeout": int64(c.MCP.CallTimeout),
		"mcp.max_backoff": int64(c.MCP.MaxBackoff), "mcp.max_message_bytes": int64(c.MCP.MaxMessageBytes),
	}
	for k, v := range positive {
		if v <= 0 {
			return fmt.Errorf("%s: must be positive, got %d", k, v)
		}
	}
	// Durations in seconds (or ms) must stay far from time.Duration's
	// overflow: at most a day.
	switch mt := c.Terminal.MaxTimeout; {
	case mt < 0:
		return fmt.Errorf("terminal.max_timeout: must be positive (or 0 for the default), got %d", mt)
	case mt > 0 && mt < c.Terminal.Timeout:
		return fmt.Errorf("terminal.max_timeout: %d is below terminal.timeout (%d)", mt, c.Terminal.Timeout)
	}
	for k, v := range map[string]int64{"storage.checkpoint_interval": int64(c.Storage.CheckpointInterval),
		"storage.busy_timeout": int64(c.Storage.BusyTimeout) / 1000, "terminal.max_timeout": int64(c.Terminal.MaxTimeout),
		"mcp.idle_timeout": int64(c.MCP.IdleTimeout), "mcp.start_timeout": int64(c.MCP.StartTimeout),
		"mcp.call_timeout": int64(c.MCP.CallTimeout), "mcp.max_backoff": int64(c.MCP.MaxBackoff)} {
		if v > 86400 {
			return fmt.Errorf("%s: at most a day, got %d", k, v)
		}
	}
	if len(c.MCP.Servers) > protocol.MaxMCPServers {
		return fmt.Errorf("mcp.servers: %d servers; at most %d", len(c.MCP.Servers), protocol.MaxMCPServers)
	}
	for name, sv := range c.MCP.Servers {
		if err := protocol.ValidateMCPServer("mcp.servers."+name, sv.Params(name), true); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "invalid params: "))
		}
	}
	if c.Cluster.LeaseTTL > 3600 {
		return fmt.Errorf("cluster.lease_ttl: at most 3600 seconds, got %d", c.Cluster.LeaseTTL)
	}
	if len(c.Cluster.Label) > 200 {
		return fmt.Errorf("cluster.label: longer than 200 bytes")
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %v", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("listen: %q is not a loopback address; sessiond serves only this machine", c.Listen)
	}
	if c.MetricsListen != "" {
		host, _, err := net.SplitHostPort(c.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics_listen: %v", err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("metrics_listen: %q is not a loopback address; it serves /metrics without the token", c.MetricsListen)
		}
	}
	return nil
}

// validate checks the driver and the DSN; errors never repeat the DSN's
// password.
func (s StoreConfig) validate() error {
	d, err := store.ParseDriver(s.Driver)
	if err != nil {
		return fmt.Errorf("store.driver: must be sqlite or postgres, got %q", s.Driver)
	}
	if s.Driver == "" && s.DSN != "" {
		d = store.Postgres
	}
	switch {
	case d == store.SQLite && s.DSN != "":
		return fmt.Errorf("store.dsn: set for driver sqlite, which keeps state.db in the home; remove it or say store.driver: postgres")
	case d == store.SQLite && s.MaxConns != 0:
		return fmt.Errorf("store.max_conns: set for driver sqlite, which has one writer connection; remove it or say store.driver: postgres")
	case s.MaxConns < 0 || s.MaxConns > store.MaxPoolConns:
		return fmt.Errorf("store.max_conns: must be 1-%d (0: the default, 16), got %d", store.MaxPoolConns, s.MaxConns)
	case d == store.Postgres:
		if err := store.CheckDSN(s.DSN); err != nil {
			return fmt.Errorf("store.dsn: %w", err)
		}
	}
	return nil
}
