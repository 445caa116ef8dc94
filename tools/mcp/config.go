package mcp

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/protocol"
)

// Sources of a server.
const (
	SourceConfig  = "config"  // config.yaml's mcp.servers
	SourceSession = "session" // session.create's mcp_servers
)

// Server is one MCP server of a session as frozen at its creation (stored
// with the session as JSON): a stdio server (Command, Args, Env, Cwd) or a
// streamable HTTP one (URL, Headers). Network and AutoApprove come from
// config.yaml only (Source "config"); a session-given server has neither.
type Server struct {
	Name        string            `json:"name"`
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Network     bool              `json:"network,omitempty"`
	AutoApprove []string          `json:"auto_approve,omitempty"`
	Source      string            `json:"source"`
}

// Transport is "stdio" or "http".
func (s Server) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// AutoApproved reports whether tool is in the server's auto_approve (a
// config.yaml server's only; a session-given server never skips approval,
// whatever its stored entry says).
func (s Server) AutoApproved(tool string) bool {
	return s.Source == SourceConfig && slices.Contains(s.AutoApprove, tool)
}

// FromParams converts a validated wire entry; fromConfig marks
// config.yaml's (which keep network and auto_approve).
func FromParams(p protocol.MCPServerParams, fromConfig bool) Server {
	s := Server{Name: p.Name, Command: p.Command, Args: p.Args, Env: p.Env, Cwd: p.Cwd, URL: p.URL, Headers: p.Headers, Source: SourceSession}
	if fromConfig {
		s.Source = SourceConfig
		s.AutoApprove = p.AutoApprove
		s.Network = p.Network != nil && *p.Network
	}
	return s
}

// Merge returns the session's frozen list: every config server (sorted by
// name) then the session's own, in their order. A session server named
// like a config server is an invalid_params error naming it.
func Merge(config map[string]protocol.MCPServerParams, session []protocol.MCPServerParams) ([]Server, error) {
	names := make([]string, 0, len(config))
	for n := range config {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Server, 0, len(config)+len(session))
	for _, n := range names {
		p := config[n]
		p.Name = n
		out = append(out, FromParams(p, true))
	}
	for i, p := range session {
		if _, ok := config[p.Name]; ok {
			return nil, protocol.InvalidParams(fmt.Sprintf("mcp_servers[%d].name", i), "%q is the name of a server of config.yaml; choose another", p.Name)
		}
		out = append(out, FromParams(p, false))
	}
	return out, nil
}

// Encode is the stored form of a session's list (JSON).
func Encode(list []Server) string {
	if list == nil {
		list = []Server{}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// Decode reads a stored list.
func Decode(s string) ([]Server, error) {
	var out []Server
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("mcp: stored server list: %w", err)
	}
	return out, nil
}
