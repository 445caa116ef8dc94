package daemon

import (
	"os"
	"sync"
	"time"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/tools"
	"github.com/sessiond/sessiond/tools/mcp"
)

// mcpRegistry holds the MCP servers of the sessions that ran a turn on
// this daemon (one tools/mcp.Set per session): they start at a turn's
// start, stop after mcp.idle_timeout without a turn, at session.delete and
// at the daemon's stop. In a cluster they run on the daemon that runs the
// session's turns and move with it (the old owner's idle out).
type mcpRegistry struct {
	d *Daemon

	mu      sync.Mutex
	sets    map[string]*mcp.Set
	stopped bool
}

func newMCPRegistry(d *Daemon) *mcpRegistry {
	return &mcpRegistry{d: d, sets: map[string]*mcp.Set{}}
}

// acquire returns session s's set, in use until release (nil when the
// session has no server or the daemon is stopping). sb is the session's
// sandbox spec (nil: off).
func (r *mcpRegistry) acquire(s sessionRow, sb *sandbox.Spec) *mcp.Set {
	list := r.d.mcpServers(s)
	if len(list) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	set := r.sets[s.SessionID]
	if set == nil {
		cfg := r.d.cfg
		opt := mcp.Options{SessionID: s.SessionID, Cwd: s.Cwd, Sandbox: sb,
			Env:             tools.AllowedEnv(os.Environ(), cfg.Terminal.EnvPassthrough, cfg.Terminal.EnvExclude),
			StartTimeout:    time.Duration(cfg.MCP.StartTimeout) * time.Second,
			IdleTimeout:     time.Duration(cfg.MCP.IdleTimeout) * time.Second,
			MaxBackoff:      time.Duration(cfg.MCP.MaxBackoff) * time.Second,
			MaxMessageBytes: cfg.MCP.MaxMessageBytes,
			Logger:          r.d.log,
			Version:         Version,
			OnStatus: func(st protocol.MCPServerStatus) {
				r.d.hub.publishDelta(s.SessionID, protocol.EventMCPStatus, "", 0, st)
			}}
		if sb != nil && r.d.sandboxErr != nil {
			opt.SandboxUnavailable = r.d.sandboxErr.Error()
		}
		set = mcp.NewSet(list, opt)
		r.sets[s.SessionID] = set
	}
	set.Acquire()
	return set
}

// status is session sessionID's mcp_servers for a snapshot: the live
// set's, else every server of list stopped.
func (r *mcpRegistry) status(sessionID string, list []mcp.Server) []protocol.MCPServerStatus {
	r.mu.Lock()
	set := r.sets[sessionID]
	r.mu.Unlock()
	if set != nil {
		return set.Status()
	}
	out := make([]protocol.MCPServerStatus, 0, len(list))
	for _, sv := range list {
		out = append(out, protocol.MCPServerStatus{Name: sv.Name, Status: protocol.MCPStopped, Tools: []string{},
			Transport: sv.Transport(), Source: sv.Source})
	}
	return out
}

// drop stops and forgets a session's servers (session.delete).
func (r *mcpRegistry) drop(sessionID string) {
	r.mu.Lock()
	set := r.sets[sessionID]
	delete(r.sets, sessionID)
	r.mu.Unlock()
	if set != nil {
		set.Stop()
	}
}

// stopAll stops every server and starts none again (graceful stop).
func (r *mcpRegistry) stopAll() {
	r.mu.Lock()
	r.stopped = true
	sets := r.sets
	r.sets = map[string]*mcp.Set{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, set := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set.Stop()
		}()
	}
	wg.Wait()
}
