package protocol

import "testing"

// Every server name ValidateMCPServer accepts, with any tool name a model
// may see ([A-Za-z0-9_-]), splits back to itself: a call of
// mcp__<server>__<tool> reaches that server's tool, never another's
// (server "a_" with tool "b" and server "a" with tool "_b" would both be
// mcp__a___b).
func TestMCPToolNameRoundTrip(t *testing.T) {
	for _, server := range []string{"a", "a_", "_a", "a-", "a_b", "A9-_x", "a_-", "-_"} {
		ok := ValidateMCPServer("s", MCPServerParams{Name: server, Command: "x"}, false) == nil
		for _, tool := range []string{"b", "_b", "__b", "b_", "b__c", "-"} {
			s, tl, split := SplitMCPToolName(MCPToolName(server, tool))
			if ok && (!split || s != server || tl != tool) {
				t.Errorf("server %q (accepted) tool %q: %s splits as %q %q", server, tool, MCPToolName(server, tool), s, tl)
			}
		}
	}
}
