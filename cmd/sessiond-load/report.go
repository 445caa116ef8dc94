package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Report is the result of one run (--json prints it as is). Durations are
// in milliseconds (_ms) or seconds (_s), memory in bytes, rates per second.
type Report struct {
	Mode          string  `json:"mode"`
	Clients       int     `json:"clients"`
	Sessions      int     `json:"sessions"`
	DurationS     float64 `json:"duration_s"`
	RatePerClient float64 `json:"rate_per_client"` // ops/s; 0 = closed loop
	Jitter        float64 `json:"jitter"`          // intervals uniform in [1-j, 1+j] × 1/rate
	Mix           string  `json:"mix,omitempty"`
	ThinkMS       float64 `json:"think_ms"`
	ChunkDelayMS  float64 `json:"chunk_delay_ms"`
	ToolShare     float64 `json:"tool_share"`
	NoFileLimit   uint64  `json:"nofile_limit"`
	StartedAt     string  `json:"started_at"` // RFC 3339 UTC
	// LoadAvgStart and LoadAvgEnd are the machine's 1/5/15-minute load
	// averages before setup and after the run.
	LoadAvgStart [3]float64 `json:"loadavg_start"`
	LoadAvgEnd   [3]float64 `json:"loadavg_end"`

	Daemon DaemonReport `json:"daemon"`
	// Setup is the phase before the window (sessions created, clients
	// connected); its calls are not in Methods.
	Setup SetupReport `json:"setup"`
	// ElapsedS is the measured window; throughputs divide by it.
	ElapsedS        float64        `json:"elapsed_s"`
	Methods         []MethodReport `json:"methods"`
	TotalOK         int64          `json:"total_ok"`
	ThroughputPerS  float64        `json:"throughput_per_s"`
	RPCErrors       []ErrorCount   `json:"rpc_errors"`
	TransportErrors []ErrorCount   `json:"transport_errors"`
	CheckFailures   []ErrorCount   `json:"check_failures"`
	// UnexpectedErrors counts every error that is not a designed refusal,
	// failed checks and failed turns included.
	UnexpectedErrors int64 `json:"unexpected_errors"`
	DesignedRefusals int64 `json:"designed_refusals"`
	// CPU is the CPU time used during the measured window (idle: while
	// the connections were held).
	CPU CPUReport `json:"cpu"`
	// SchedulingLag is how late operations started after their due time:
	// large values mean the load generator itself was starved of CPU.
	SchedulingLag Latency    `json:"scheduling_lag"`
	Turns         TurnReport `json:"turns"`
	// SnapshotRequired counts resumes with after_seq answered with
	// snapshot_required (events no longer retained); not an error.
	SnapshotRequired int64       `json:"snapshot_required"`
	Reconnects       int64       `json:"reconnects"`
	Idle             *IdleReport `json:"idle,omitempty"`
	DaemonMem        MemReport   `json:"daemon_mem"`
	ClientMem        MemReport   `json:"client_mem"`
	// ModelRequests is the number of chat-completion requests the fake
	// model answered.
	ModelRequests int `json:"model_requests"`
}

// DaemonReport describes the target daemon.
type DaemonReport struct {
	URL     string `json:"url"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	Home    string `json:"home"`
	Spawned bool   `json:"spawned"`
	// Count is the number of daemons the clients were dealt over; URLs and
	// Homes list them when there are several (URL, Home, PID and the
	// memory figures are the first one's).
	Count        int      `json:"count"`
	URLs         []string `json:"urls,omitempty"`
	Homes        []string `json:"homes,omitempty"`
	Config       string   `json:"config,omitempty"`    // the spawned daemon's config.yaml
	ExitCode     *int     `json:"exit_code,omitempty"` // spawned: after SIGTERM (-1: killed by a signal)
	Killed       bool     `json:"killed,omitempty"`    // spawned: did not stop within 30 s and was SIGKILLed
	CrashMarkers []string `json:"crash_markers,omitempty"`
}

// CPUReport is the CPU time (user+system, from /proc/PID/stat) the daemon
// and this tool used during the measured window, in seconds, in cores
// (seconds per second of window) and per successful operation (ms).
type CPUReport struct {
	DaemonS     float64 `json:"daemon_s"`
	DaemonCores float64 `json:"daemon_cores"`
	DaemonPerOp float64 `json:"daemon_per_op_ms"`
	ClientS     float64 `json:"client_s"`
	ClientCores float64 `json:"client_cores"`
	Err         string  `json:"error,omitempty"`
}

// SetupReport is the phase before the measured window.
type SetupReport struct {
	SessionsCreated int     `json:"sessions_created"`
	CreateS         float64 `json:"create_s"`
	CreatePerS      float64 `json:"create_per_s"`
	CreateLatency   Latency `json:"create_latency"`
	Connections     int     `json:"connections"`
	ConnectS        float64 `json:"connect_s"`
}

// IdleReport is the idle mode's result. PerConnBytes is (Steady -
// Baseline) / Open.
type IdleReport struct {
	Open              int   `json:"open"`
	Failed            int   `json:"failed"`
	AliveAtEnd        int   `json:"alive_at_end"`
	BaselineRSSBytes  int64 `json:"baseline_rss_bytes"`
	ConnectedRSSBytes int64 `json:"connected_rss_bytes"`
	SteadyRSSBytes    int64 `json:"steady_rss_bytes"`
	PerConnBytes      int64 `json:"per_conn_bytes"`
	ClientPerConn     int64 `json:"client_per_conn_bytes"`
}

// Mem is one reading of /proc/PID/status and /proc/PID/fd.
type Mem struct {
	RSSBytes int64 `json:"rss_bytes"` // VmRSS
	HWMBytes int64 `json:"hwm_bytes"` // VmHWM, the peak RSS
	Threads  int   `json:"threads"`
	FDs      int   `json:"fds"` // -1: not readable
}

// MemReport is the memory of one process over the run: the last reading,
// the largest sampled RSS (sampled every second) and the peak (VmHWM).
type MemReport struct {
	Last        Mem    `json:"last"`
	MaxRSSBytes int64  `json:"max_sampled_rss_bytes"`
	Samples     int    `json:"samples"`
	Err         string `json:"error,omitempty"`
}

// sampler reads the daemon's and this process's memory every second.
type sampler struct {
	pid  int
	mu   sync.Mutex
	d, c MemReport
	done chan struct{}
	wg   sync.WaitGroup
}

func startSampler(pid int) *sampler {
	s := &sampler{pid: pid, done: make(chan struct{})}
	s.sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.sample()
			case <-s.done:
				return
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	one := func(r *MemReport, pid int) {
		m, err := readMem(pid)
		if err != nil {
			r.Err = err.Error()
			return
		}
		r.Err = ""
		r.Last = m
		r.MaxRSSBytes = max(r.MaxRSSBytes, m.RSSBytes)
		r.Samples++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	one(&s.d, s.pid)
	one(&s.c, 0)
}

// now samples at once and returns the daemon's reading.
func (s *sampler) now() Mem {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Last
}

func (s *sampler) nowClient() Mem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Last
}

func (s *sampler) stop() {
	close(s.done)
	s.wg.Wait()
	s.sample()
}

func (s *sampler) daemon() MemReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d
}

func (s *sampler) client() MemReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (r *Report) writeText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	pacing := fmt.Sprintf(", %g ops/s per client, open loop, ±%.0f%% jitter", r.RatePerClient, 100*r.Jitter)
	switch {
	case r.Mode == "idle":
		pacing = ", connections held idle"
	case r.RatePerClient == 0:
		pacing = ", closed loop"
	}
	p("sessiond-load: mode %s, %d clients, %d sessions, %gs window%s", r.Mode, r.Clients, r.Sessions, r.DurationS, pacing)
	if r.Mix != "" {
		p("  mix %s; tool turns %.0f%%; fake model think %gms, chunk delay %gms", r.Mix, 100*r.ToolShare, r.ThinkMS, r.ChunkDelayMS)
	}
	how := "running daemon, home " + r.Daemon.Home
	if r.Daemon.Spawned {
		how = "spawned, temporary home " + r.Daemon.Home
	}
	p("  daemon pid %d, version %s, %s (%s)", r.Daemon.PID, r.Daemon.Version, r.Daemon.URL, how)
	if r.Daemon.Count > 1 {
		p("  %d daemons sharing one store, clients dealt round-robin: %s", r.Daemon.Count, strings.Join(r.Daemon.URLs, " "))
	}
	p("  load average %.2f %.2f %.2f at start, %.2f %.2f %.2f at end; RLIMIT_NOFILE %d",
		r.LoadAvgStart[0], r.LoadAvgStart[1], r.LoadAvgStart[2], r.LoadAvgEnd[0], r.LoadAvgEnd[1], r.LoadAvgEnd[2], r.NoFileLimit)
	if su := r.Setup; su.SessionsCreated > 0 {
		p("setup: %d sessions created in %.1fs (%.0f/s, p50 %.2fms p99 %.2fms); %d connections in %.1fs",
			su.SessionsCreated, su.CreateS, su.CreatePerS, su.CreateLatency.P50MS, su.CreateLatency.P99MS, su.Connections, su.ConnectS)
	} else if su.Connections > 0 {
		p("setup: %d connections in %.1fs", su.Connections, su.ConnectS)
	}
	p("")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "method\tok\terrors\tok/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tservice p50\tservice p99\t")
	for _, m := range r.Methods {
		l, sv := m.LatencyMS, m.ServiceMS
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", m.Method, m.OK, m.Errors, m.OKPerS,
			l.P50MS, l.P90MS, l.P99MS, l.P999MS, l.MaxMS, sv.P50MS, sv.P99MS)
	}
	fmt.Fprintf(tw, "total\t%d\t\t%.1f\t\t\t\t\t\t\t\t\n", r.TotalOK, r.ThroughputPerS)
	tw.Flush()
	p("")
	if r.SchedulingLag.Count > 0 {
		p("latency counts from each operation's due time (open loop), service time from sending it; the generator started operations late by p50 %.2fms, p99 %.2fms, max %.2fms",
			r.SchedulingLag.P50MS, r.SchedulingLag.P99MS, r.SchedulingLag.MaxMS)
	}
	if c := r.CPU; c.Err != "" {
		p("CPU: unavailable (%s)", c.Err)
	} else if r.Mode == "idle" {
		p("CPU while the connections were held idle: daemon %.2fs (%.3f cores), this tool %.2fs", c.DaemonS, c.DaemonCores, c.ClientS)
	} else {
		p("CPU during the window: daemon %.1fs (%.2f cores, %.3f ms per successful operation), this tool %.1fs (%.2f cores)",
			c.DaemonS, c.DaemonCores, c.DaemonPerOp, c.ClientS, c.ClientCores)
	}
	list := func(title string, ecs []ErrorCount) {
		if len(ecs) == 0 {
			p("%s: none", title)
			return
		}
		var parts []string
		for _, e := range ecs {
			tag := ""
			if e.Designed {
				tag = " (designed)"
			}
			parts = append(parts, fmt.Sprintf("%s %s ×%d%s", e.Method, e.Kind, e.Count, tag))
		}
		p("%s: %s", title, strings.Join(parts, "; "))
	}
	list("errors by reason", r.RPCErrors)
	list("transport errors", r.TransportErrors)
	list("failed checks", r.CheckFailures)
	p("unexpected errors: %d; designed refusals: %d; reconnects: %d; resumes answered snapshot_required: %d",
		r.UnexpectedErrors, r.DesignedRefusals, r.Reconnects, r.SnapshotRequired)
	if t := r.Turns; t.Submitted > 0 {
		p("turns: %d submitted, %d completed, %d failed, %d unfinished after the drain; submit → turn.completed p50 %.1fms p99 %.1fms max %.1fms",
			t.Submitted, t.Completed, t.Failed, t.Unfinished, t.Latency.P50MS, t.Latency.P99MS, t.Latency.MaxMS)
		for _, s := range t.FailureSamples {
			p("  failed turn: %s", s)
		}
		p("fake model requests: %d", r.ModelRequests)
	}
	if i := r.Idle; i != nil {
		p("idle: %d connections open (%d failed), %d alive at the end", i.Open, i.Failed, i.AliveAtEnd)
		p("idle: daemon RSS %s before connecting, %s once connected, %s after the hold → %.1f KiB per connection (client: %.1f KiB per connection)",
			mib(i.BaselineRSSBytes), mib(i.ConnectedRSSBytes), mib(i.SteadyRSSBytes), float64(i.PerConnBytes)/1024, float64(i.ClientPerConn)/1024)
	}
	mem := func(name string, m MemReport) {
		if m.Err != "" && m.Samples == 0 {
			p("%s memory: unavailable (%s)", name, m.Err)
			return
		}
		p("%s memory: VmRSS %s at the end (max sampled %s), VmHWM %s, %d threads, %d fds",
			name, mib(m.Last.RSSBytes), mib(m.MaxRSSBytes), mib(m.Last.HWMBytes), m.Last.Threads, m.Last.FDs)
	}
	mem("daemon", r.DaemonMem)
	mem("client", r.ClientMem)
	if d := r.Daemon; d.ExitCode != nil {
		p("daemon stopped with SIGTERM: exit %d%s", *d.ExitCode, map[bool]string{true: " (did not stop in 30 s: SIGKILLed)"}[d.Killed])
	}
	for _, m := range r.Daemon.CrashMarkers {
		p("DAEMON STDERR: %s", m)
	}
}
