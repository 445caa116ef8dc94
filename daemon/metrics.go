package daemon

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// metrics are the daemon's Prometheus metrics (docs/operations.md), in a
// registry of its own (several daemons may share a test process). Counters
// and histograms are fed by the committed events (observeEvent), the
// prompt.submit handler, the store's commits and the model transport; the
// gauges are read from state.db and the connection table at each scrape.
type metrics struct {
	reg *prometheus.Registry

	admissions    *prometheus.CounterVec // outcome
	turns         *prometheus.CounterVec // outcome
	turnDuration  prometheus.Histogram
	submitLatency prometheus.Histogram
	toolCommands  *prometheus.CounterVec // result
	modelRequests *prometheus.CounterVec // status
	storeCommit   prometheus.Histogram

	mu      sync.Mutex
	started map[string]time.Time // admission id -> turn.started, for turn_duration
}

func newMetrics(d *Daemon) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), started: map[string]time.Time{}}
	m.admissions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_admissions_total",
		Help: "Admissions settled, by outcome (completed, interrupted, failed, cancelled)."}, []string{"outcome"})
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_turns_total",
		Help: "Turns ended, by outcome (completed, interrupted, failed)."}, []string{"outcome"})
	m.turnDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_turn_duration_seconds",
		Help:    "Time from a turn's start to its settle, waits for approvals included (turns started by this process).",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}})
	m.submitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_prompt_submit_seconds",
		Help:    "prompt.submit receipt latency: from the request's dispatch to its answer (the commit included).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}})
	m.toolCommands = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_tool_commands_total",
		Help: "Terminal tool calls ended, by result (ok, failed: non-zero exit, timed_out, interrupted, denied, refused, not_run)."}, []string{"result"})
	m.modelRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_model_requests_total",
		Help: "HTTP attempts to model servers (retries count), by status: the HTTP status code, or error when no response came."}, []string{"status"})
	m.storeCommit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_store_commit_seconds",
		Help:    "Group commits of state.db: BEGIN to COMMIT, fsync included.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}})
	storeCounter := func(f func(db *store.DB) int64) func() float64 {
		return func() float64 {
			if d.db == nil {
				return 0
			}
			return float64(f(d.db))
		}
	}
	txs := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessiond_store_transactions_total",
		Help: "Write transactions committed by this process (on SQLite each transaction of a group commit)."},
		storeCounter(func(db *store.DB) int64 { _, n := db.Stats(); return n }))
	reruns := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessiond_store_transaction_reruns_total",
		Help: "PostgreSQL: write transactions run again after a deadlock (40P01) or serialization failure (40001); always 0 on SQLite."},
		storeCounter((*store.DB).Reruns))
	statements := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessiond_store_statements_total",
		Help: "Statements run by write transactions, committed or not, without their BEGIN and COMMIT (on PostgreSQL each is a round trip to the server)."},
		storeCounter((*store.DB).Statements))
	m.reg.MustRegister(m.admissions, m.turns, m.turnDuration, m.submitLatency, m.toolCommands, m.modelRequests, m.storeCommit, txs, reruns, statements,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{d: d})
	return m
}

// stateCollector reads the gauges at scrape time, so they are exact.
type stateCollector struct{ d *Daemon }

var (
	descQueued      = prometheus.NewDesc("sessiond_queued_admissions", "Admissions waiting in their session's FIFO (status queued).", nil, nil)
	descHeld        = prometheus.NewDesc("sessiond_held_sessions", "Sessions held by an admission left unknown by a crash, until an operator resolves it.", nil, nil)
	descOpenPrompts = prometheus.NewDesc("sessiond_open_prompts", "Approvals and clarifications waiting for an answer.", nil, nil)
	descConnections = prometheus.NewDesc("sessiond_connections", "Open WebSocket connections.", nil, nil)
	descUp          = prometheus.NewDesc("sessiond_state_readable", "1 when the gauges above could be read from state.db at this scrape, else 0.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descHeld, descOpenPrompts, descConnections, descUp} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	d.connMu.Lock()
	conns := len(d.conns)
	d.connMu.Unlock()
	ch <- prometheus.MustNewConstMetric(descConnections, prometheus.GaugeValue, float64(conns))
	if d.db == nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := admission.CountAll(ctx, d.db)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(n.Queued))
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(n.Held))
	ch <- prometheus.MustNewConstMetric(descOpenPrompts, prometheus.GaugeValue, float64(n.Prompts))
}

// observeCommit is the store's commit observer.
func (m *metrics) observeCommit(d time.Duration, _ int) { m.storeCommit.Observe(d.Seconds()) }

// timeSubmit observes the latency of a prompt.submit that began at start
// (deferred by its handler).
func (m *metrics) timeSubmit(start time.Time) { m.submitLatency.Observe(time.Since(start).Seconds()) }

// observe counts a committed event.
func (m *metrics) observe(e store.Event, pl any) {
	switch p := pl.(type) {
	case protocol.Receipt:
		if p.Status == protocol.StatusTerminal && p.Outcome != nil {
			m.admissions.WithLabelValues(string(*p.Outcome)).Inc()
		}
	case protocol.TurnStartedPayload:
		if e.AdmissionID != nil {
			m.mu.Lock()
			m.started[*e.AdmissionID] = time.Now()
			m.mu.Unlock()
		}
	case protocol.TurnCompletedPayload:
		m.turns.WithLabelValues(string(p.Outcome)).Inc()
		if e.AdmissionID != nil {
			m.mu.Lock()
			at, ok := m.started[*e.AdmissionID]
			delete(m.started, *e.AdmissionID)
			m.mu.Unlock()
			if ok {
				m.turnDuration.Observe(time.Since(at).Seconds())
			}
		}
	case protocol.ToolCompletedPayload:
		if r, ok := toolResult(p); ok {
			m.toolCommands.WithLabelValues(r.result).Inc()
		}
	}
}

// toolOutcome is what a terminal tool.completed says, for the metric and
// the audit line.
type toolOutcome struct {
	result     string // ok, failed, timed_out, interrupted, denied, refused, not_run
	exitCode   *int
	durationMS int64
	totalBytes int64
	err        string
}

// toolResult reads a terminal tool.completed payload (its result is a
// protocol.TerminalResult when the command ran, a protocol.ToolError when
// it did not or was interrupted); ok is false for other tools.
func toolResult(p protocol.ToolCompletedPayload) (toolOutcome, bool) {
	if p.Name != protocol.ToolTerminal {
		return toolOutcome{}, false
	}
	r, _ := p.Outcome() // a result of another shape counts by the payload's exit_code
	var o toolOutcome
	switch {
	case r.Terminal != nil:
		code := r.Terminal.ExitCode
		o = toolOutcome{exitCode: &code, durationMS: r.Terminal.DurationMS, totalBytes: r.Terminal.TotalBytes}
	case r.Error != nil:
		o = toolOutcome{exitCode: r.Error.ExitCode, durationMS: r.Error.DurationMS, err: r.Error.Error}
	}
	if o.exitCode == nil {
		o.exitCode = p.ExitCode
	}
	switch {
	case strings.HasPrefix(o.err, "interrupted while running"):
		o.result = "interrupted"
	case strings.Contains(o.err, "denied") || strings.Contains(o.err, "approval timed out"):
		o.result = "denied"
	case strings.HasPrefix(o.err, "refused"):
		o.result = "refused"
	case o.err != "" && o.exitCode == nil:
		o.result = "not_run"
	case r.Terminal != nil && r.Terminal.TimedOut:
		o.result = "timed_out"
	case o.exitCode != nil && *o.exitCode == 0:
		o.result = "ok"
	default:
		o.result = "failed"
	}
	return o, true
}

// modelTransport counts and logs each HTTP attempt to a model server. It
// logs the server's host and path, the status and the error, never headers
// or bodies (they hold the API key and the conversation).
type modelTransport struct {
	next http.RoundTripper
	d    *Daemon
}

func (t *modelTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	t.d.metrics.modelRequests.WithLabelValues(status).Inc()
	if err != nil || resp.StatusCode >= 400 {
		attrs := []any{"audit", true, "server", req.URL.Scheme + "://" + req.URL.Host + req.URL.Path, "status", status,
			"duration_ms", time.Since(start).Milliseconds()}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return resp, err // an interrupt, not a failure of the server
			}
			attrs = append(attrs, "err", redactURLError(err, req))
		}
		t.d.log.Warn("model request failed", attrs...)
	}
	return resp, err
}

// redactURLError is err's text without the request URL's query (which a
// gateway's key could sit in).
func redactURLError(err error, req *http.Request) string {
	msg := err.Error()
	if req.URL.RawQuery != "" {
		msg = strings.ReplaceAll(msg, req.URL.RawQuery, "REDACTED")
	}
	return msg
}

// wrapModelTransport is model.Config.WrapTransport.
func (d *Daemon) wrapModelTransport(next http.RoundTripper) http.RoundTripper {
	return &modelTransport{next: next, d: d}
}

// serveMetrics is GET /metrics on the main listener: the bearer token is
// required, as for /rpc.
func (d *Daemon) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !d.bearerOK(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sessiond"`)
		http.Error(w, "unauthorized: send the descriptor token as Authorization: Bearer (or use metrics_listen)", http.StatusUnauthorized)
		return
	}
	d.metricsHandler().ServeHTTP(w, r)
}

func (d *Daemon) metricsHandler() http.Handler {
	return promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{d}})
}

// bearerOK checks "Authorization: Bearer TOKEN" in constant time.
func (d *Daemon) bearerOK(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(d.token)) == 1
}

type slogPrinter struct{ d *Daemon }

func (p slogPrinter) Println(v ...any) { p.d.log.Error("metrics", "err", fmt.Sprint(v...)) }

// startMetricsListener serves GET /metrics without a token on
// metrics_listen (loopback only; checked by Config.Validate), when set.
func (d *Daemon) startMetricsListener() error {
	if d.cfg.MetricsListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("metrics_listen %s: %w", d.cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metricsHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found: this listener serves GET /metrics only", http.StatusNotFound)
	})
	d.metricsSrv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.hostAllowed(r.Host) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	d.metricsAddr = ln.Addr().String()
	go d.metricsSrv.Serve(ln)
	d.log.Info("metrics listening without the token (metrics_listen)", "url", "http://"+d.metricsAddr+"/metrics")
	return nil
}
