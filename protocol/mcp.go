package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

// MCP servers (PROTOCOL.md section 10.1): the wire shapes of a session's
// Model Context Protocol servers.

// MCPServerParams is one entry of session.create's mcp_servers: a stdio
// server (Command, with Args, Env and Cwd) or a streamable HTTP server
// (URL, with Headers), never both. Name is [A-Za-z0-9_-]{1,32}, unique in
// the session (config.yaml's servers included). Network and AutoApprove
// are config.yaml's only: a server given by a client may never widen what
// the configuration allows, so either one is refused with invalid_params.
type MCPServerParams struct {
	Name    string            `json:"name"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Network is refused: only config.yaml's servers may have the network.
	Network *bool `json:"network,omitempty"`
	// AutoApprove is refused: only config.yaml's servers may skip approval.
	AutoApprove []string `json:"auto_approve,omitempty"`
}

// MCPStatus is the state of one MCP server of a session.
type MCPStatus string

const (
	// MCPStarting: the server process is starting or in the MCP
	// initialize handshake; its tools are not offered yet.
	MCPStarting MCPStatus = "starting"
	// MCPReady: initialized and its tools listed; they reach the model.
	MCPReady MCPStatus = "ready"
	// MCPFailed: it could not start, died or broke the protocol; its
	// tools are withdrawn (the model is told) and the daemon restarts it
	// with backoff. Error says why.
	MCPFailed MCPStatus = "failed"
	// MCPStopped: not running: the session has not run a turn on this
	// daemon yet, was idle for mcp.idle_timeout, or the daemon is stopping.
	MCPStopped MCPStatus = "stopped"
)

// MCPServerStatus is one entry of a snapshot's mcp_servers and the payload
// of an mcp.status event (seq null, not stored): the server's Name, its
// Status, the last Error (when failed, or the error that made it restart),
// Tools (the tool names as the server gives them, without the
// "mcp__<server>__" prefix; empty unless ready), Transport ("stdio" or
// "http") and Source ("config" for config.yaml's servers, "session" for
// those given to session.create).
type MCPServerStatus struct {
	Name      string    `json:"name"`
	Status    MCPStatus `json:"status"`
	Error     string    `json:"error,omitempty"`
	Tools     []string  `json:"tools"`
	Transport string    `json:"transport,omitempty"`
	Source    string    `json:"source,omitempty"`
}

// EventType of an mcp.status event.
func (MCPServerStatus) EventType() EventType { return EventMCPStatus }

// Limits of mcp_servers entries.
const (
	MaxMCPServers = 32   // mcp_servers entries
	MaxMCPArgs    = 256  // args and env entries, headers
	MaxMCPArgLen  = 8192 // one arg, env or header value
)

// MCPNamePattern is what a server name must match: it becomes part of the
// tool names the model sees (mcp__<server>__<tool>).
var MCPNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// mcpEnvName is a valid environment variable name.
var mcpEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateMCPServer checks one server (of config.yaml when fromConfig,
// else of session.create) and names the offending field under prefix
// (e.g. "mcp_servers[0]"): the name, exactly one of command and url, the
// url's scheme, env names, lengths; a session-given server may not carry
// network or auto_approve.
func ValidateMCPServer(prefix string, s MCPServerParams, fromConfig bool) error {
	f := func(name string) string { return prefix + "." + name }
	if !MCPNamePattern.MatchString(s.Name) {
		return InvalidParams(f("name"), "%q must be 1-32 characters of [A-Za-z0-9_-]", s.Name)
	}
	if strings.Contains(s.Name, "__") {
		return InvalidParams(f("name"), "%q may not hold \"__\", which separates the server from the tool in mcp__<server>__<tool>", s.Name)
	}
	if strings.HasSuffix(s.Name, "_") {
		// "a_" and tool "b" would be mcp__a___b, which is server "a"'s tool "_b".
		return InvalidParams(f("name"), "%q may not end with \"_\": mcp__<server>__<tool> would name another server's tool", s.Name)
	}
	switch {
	case s.Command == "" && s.URL == "":
		return InvalidParams(prefix, "server %q needs a command (stdio) or a url (streamable HTTP)", s.Name)
	case s.Command != "" && s.URL != "":
		return InvalidParams(prefix, "server %q has both a command and a url; give one", s.Name)
	}
	if s.URL != "" {
		if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
			return InvalidParams(prefix, "server %q has a url: args, env and cwd are for stdio servers", s.Name)
		}
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return InvalidParams(f("url"), "%q must be an http:// or https:// URL", s.URL)
		}
		if err := maxLen(f("url"), s.URL, MaxURLBytes); err != nil {
			return err
		}
	} else {
		if len(s.Headers) > 0 {
			return InvalidParams(f("headers"), "server %q is a stdio server: headers are for url servers", s.Name)
		}
		if err := maxLen(f("command"), s.Command, MaxPathBytes); err != nil {
			return err
		}
		if s.Cwd != "" && !strings.HasPrefix(s.Cwd, "/") {
			return InvalidParams(f("cwd"), "%q is not absolute", s.Cwd)
		}
		if err := maxLen(f("cwd"), s.Cwd, MaxPathBytes); err != nil {
			return err
		}
	}
	if len(s.Args) > MaxMCPArgs || len(s.Env) > MaxMCPArgs || len(s.Headers) > MaxMCPArgs {
		return InvalidParams(prefix, "server %q: at most %d args, env entries and headers each", s.Name, MaxMCPArgs)
	}
	for i, a := range s.Args {
		if err := maxLen(fmt.Sprintf("%s.args[%d]", prefix, i), a, MaxMCPArgLen); err != nil {
			return err
		}
	}
	for k, v := range s.Env {
		if !mcpEnvName.MatchString(k) {
			return InvalidParams(f("env"), "%q is not a variable name", k)
		}
		if err := maxLen(f("env."+k), v, MaxMCPArgLen); err != nil {
			return err
		}
	}
	for k, v := range s.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return InvalidParams(f("headers"), "%q is not a header name", k)
		}
		if strings.ContainsAny(v, "\r\n") {
			return InvalidParams(f("headers."+k), "a header value may not hold a line break")
		}
		if err := maxLen(f("headers."+k), v, MaxMCPArgLen); err != nil {
			return err
		}
	}
	if !fromConfig {
		if s.Network != nil {
			return InvalidParams(f("network"), "only config.yaml's servers may have network (a client may never widen what the configuration allows)")
		}
		if s.AutoApprove != nil {
			return InvalidParams(f("auto_approve"), "only config.yaml's servers may skip approval (a client may never widen what the configuration allows)")
		}
	}
	for i, t := range s.AutoApprove {
		if strings.TrimSpace(t) == "" {
			return InvalidParams(fmt.Sprintf("%s.auto_approve[%d]", prefix, i), "empty tool name")
		}
	}
	return nil
}

// validateMCPServers checks session.create's mcp_servers: each server and
// that names are unique.
func validateMCPServers(list []MCPServerParams) error {
	if len(list) > MaxMCPServers {
		return InvalidParams("mcp_servers", "%d entries; at most %d", len(list), MaxMCPServers)
	}
	seen := map[string]bool{}
	for i, s := range list {
		if err := ValidateMCPServer(fmt.Sprintf("mcp_servers[%d]", i), s, false); err != nil {
			return err
		}
		if seen[s.Name] {
			return InvalidParams(fmt.Sprintf("mcp_servers[%d].name", i), "%q is given twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// MCPToolPrefix starts the model-facing name of every MCP tool:
// "mcp__<server>__<tool>".
const MCPToolPrefix = "mcp__"

// MCPToolName is the model-facing name of tool of server.
func MCPToolName(server, tool string) string { return MCPToolPrefix + server + "__" + tool }

// SplitMCPToolName parses "mcp__<server>__<tool>"; ok is false for any
// other name. Server names never hold "__" (ValidateMCPServer), so the
// server is the part up to the first "__" after the prefix.
func SplitMCPToolName(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, MCPToolPrefix)
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// MCPPattern is what a "session" or "always" approval of an MCP tool
// remembers: "mcp:<server>/<tool>".
func MCPPattern(server, tool string) string { return "mcp:" + server + "/" + tool }

// ApprovalKindMCP is ApprovalPayload.Kind of an MCP tool call.
const ApprovalKindMCP = "mcp"
