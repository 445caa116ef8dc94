package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
)

// Histograms hold microseconds from 1 µs to 10 min with 3 significant
// digits (≤ 0.1% error); larger values are clamped to the maximum.
const (
	histMinUS  = 1
	histMaxUS  = int64(10 * time.Minute / time.Microsecond)
	histDigits = 3
)

func newHist() *hdr.Histogram { return hdr.New(histMinUS, histMaxUS, histDigits) }

func record(h *hdr.Histogram, d time.Duration) {
	us := int64(d / time.Microsecond)
	us = min(max(us, histMinUS), histMaxUS)
	_ = h.RecordValue(us) // in range by construction
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p999_ms"`
	MaxMS  float64 `json:"max_ms"`
}

func latencyOf(h *hdr.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{Count: h.TotalCount(), MeanMS: h.Mean() / 1000,
		P50MS: ms(h.ValueAtQuantile(50)), P90MS: ms(h.ValueAtQuantile(90)), P99MS: ms(h.ValueAtQuantile(99)),
		P999MS: ms(h.ValueAtQuantile(99.9)), MaxMS: ms(h.Max())}
}

// errKey names one kind of failure of one method.
type errKey struct{ method, kind string }

// designedReasons are the refusals the daemon is designed to answer under
// load (PROTOCOL.md section 3): a bound was hit, or the daemon is stopping.
// Every other reason under this tool's workloads is unexpected.
var designedReasons = map[string]bool{string(protocol.ReasonOverloaded): true, string(protocol.ReasonDraining): true}

// designedClose are the WebSocket close statuses that are designed
// refusals: 1001 daemon stopping, 1008 client too slow, 1013 too many
// connections (limits.max_connections).
var designedClose = map[string]bool{"closed:1001": true, "closed:1008": true, "closed:1013": true}

// stats collects the outcome of every operation of a run. All methods are
// safe for concurrent use.
type stats struct {
	mu        sync.Mutex
	methods   map[string]*methodStats
	rpcErrs   map[errKey]int64
	transport map[errKey]int64
	checks    map[errKey]int64
	lag       *hdr.Histogram
	turns     turnStats
}

type methodStats struct {
	ok   int64
	errs int64
	hist *hdr.Histogram // successful calls only, from the due time
	svc  *hdr.Histogram // successful calls only, from sending the request
}

type turnStats struct {
	submitted   int64 // new (non-duplicate) admissions acknowledged
	completed   int64 // turn.completed with outcome completed
	failed      int64 // turn.completed with another outcome
	latency     *hdr.Histogram
	failSamples []string
}

func newStats() *stats {
	return &stats{methods: map[string]*methodStats{}, rpcErrs: map[errKey]int64{}, transport: map[errKey]int64{},
		checks: map[errKey]int64{}, lag: newHist(), turns: turnStats{latency: newHist()}}
}

// op records one call of method that was due at due, was sent at sent and
// ended now with err. Its latency counts from due (open loop: any delay in
// starting it is included); its service time from sent.
func (s *stats) op(method string, due, sent time.Time, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.methods[method]
	if m == nil {
		m = &methodStats{hist: newHist(), svc: newHist()}
		s.methods[method] = m
	}
	if err == nil {
		m.ok++
		record(m.hist, now.Sub(due))
		record(m.svc, now.Sub(sent))
		return
	}
	m.errs++
	var re *protocol.Error
	if errors.As(err, &re) {
		s.rpcErrs[errKey{method, string(re.Reason)}]++
		return
	}
	s.transport[errKey{method, transportKind(err)}]++
}

// transportKind names a non-RPC failure: "closed:STATUS" (WebSocket close
// status, -1 for a broken connection), "dial:HTTP STATUS", "dial:ERROR",
// "timeout", or "other:ERROR".
func transportKind(err error) string {
	var ce *rpc.ClosedError
	var de *rpc.DialError
	switch {
	case errors.As(err, &ce):
		return fmt.Sprintf("closed:%d", int(ce.Status))
	case errors.As(err, &de) && de.StatusCode != 0:
		return fmt.Sprintf("dial:HTTP %d", de.StatusCode)
	case errors.As(err, &de):
		return "dial:" + shortErr(de.Err)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other:" + shortErr(err)
}

// shortErr keeps the last part of a wrapped error message ("dial tcp …:
// connect: connection refused" → "connection refused").
func shortErr(err error) string {
	if err == nil {
		return "nil"
	}
	msg := err.Error()
	for i := len(msg) - 2; i > 0; i-- {
		if msg[i] == ':' && msg[i+1] == ' ' {
			return msg[i+2:]
		}
	}
	return msg
}

// check records a failed expectation about a successful answer (e.g. a
// duplicate submit that was not reported as a duplicate). Checks are always
// unexpected.
func (s *stats) check(method, what string) {
	s.mu.Lock()
	s.checks[errKey{method, what}]++
	s.mu.Unlock()
}

// late records how late an operation started after its due time (the load
// generator's own scheduling delay).
func (s *stats) late(d time.Duration) {
	s.mu.Lock()
	record(s.lag, d)
	s.mu.Unlock()
}

func (s *stats) submitted() {
	s.mu.Lock()
	s.turns.submitted++
	s.mu.Unlock()
}

// turnEnded records a turn.completed of an admission this tool submitted at
// intended.
func (s *stats) turnEnded(outcome, errText string, intended time.Time) {
	d := time.Since(intended)
	s.mu.Lock()
	defer s.mu.Unlock()
	if outcome == "completed" {
		s.turns.completed++
		record(s.turns.latency, d)
		return
	}
	s.turns.failed++
	if len(s.turns.failSamples) < 5 {
		s.turns.failSamples = append(s.turns.failSamples, outcome+": "+errText)
	}
}

func (s *stats) turnCounts() (submitted, ended int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns.submitted, s.turns.completed + s.turns.failed
}

// MethodReport is one method's figures, latencies of successful calls:
// Latency from each call's due time (what a client waiting for it sees,
// the generator's own scheduling delay included), Service from sending the
// request to reading its answer.
type MethodReport struct {
	Method    string  `json:"method"`
	OK        int64   `json:"ok"`
	Errors    int64   `json:"errors"`
	OKPerS    float64 `json:"ok_per_s"`
	LatencyMS Latency `json:"latency"`
	ServiceMS Latency `json:"service"`
}

// ErrorCount is a number of failures of one kind. Kind is a JSON-RPC
// error.data.reason (rpc errors), a transport kind such as "closed:1008" or
// "timeout", or a failed check. Designed marks designed refusals.
type ErrorCount struct {
	Method   string `json:"method"`
	Kind     string `json:"kind"`
	Count    int64  `json:"count"`
	Designed bool   `json:"designed"`
}

// TurnReport counts the turns of the admissions this tool submitted.
// Latency is from the submit's due time to its turn.completed event.
type TurnReport struct {
	Submitted      int64    `json:"submitted"`
	Completed      int64    `json:"completed"`
	Failed         int64    `json:"failed"`
	Unfinished     int64    `json:"unfinished"`
	Latency        Latency  `json:"latency"`
	FailureSamples []string `json:"failure_samples,omitempty"`
}

// fill writes the collected figures into r; elapsed is the measured window.
func (s *stats) fill(r *Report, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secs := elapsed.Seconds()
	for _, name := range slices.Sorted(maps.Keys(s.methods)) {
		m := s.methods[name]
		mr := MethodReport{Method: name, OK: m.ok, Errors: m.errs, LatencyMS: latencyOf(m.hist), ServiceMS: latencyOf(m.svc)}
		if secs > 0 {
			mr.OKPerS = float64(m.ok) / secs
		}
		r.Methods = append(r.Methods, mr)
		r.TotalOK += m.ok
	}
	if secs > 0 {
		r.ThroughputPerS = float64(r.TotalOK) / secs
	}
	add := func(src map[errKey]int64, designed func(errKey) bool, dst *[]ErrorCount) {
		for k, n := range src {
			ec := ErrorCount{Method: k.method, Kind: k.kind, Count: n, Designed: designed(k)}
			*dst = append(*dst, ec)
			if !ec.Designed {
				r.UnexpectedErrors += n
			} else {
				r.DesignedRefusals += n
			}
		}
		sort.Slice(*dst, func(i, j int) bool {
			a, b := (*dst)[i], (*dst)[j]
			if a.Count != b.Count {
				return a.Count > b.Count
			}
			return a.Method+a.Kind < b.Method+b.Kind
		})
	}
	r.RPCErrors, r.TransportErrors, r.CheckFailures = []ErrorCount{}, []ErrorCount{}, []ErrorCount{}
	add(s.rpcErrs, func(k errKey) bool { return designedReasons[k.kind] }, &r.RPCErrors)
	add(s.transport, func(k errKey) bool { return designedClose[k.kind] }, &r.TransportErrors)
	add(s.checks, func(errKey) bool { return false }, &r.CheckFailures)
	r.SchedulingLag = latencyOf(s.lag)
	t := s.turns
	r.Turns = TurnReport{Submitted: t.submitted, Completed: t.completed, Failed: t.failed,
		Unfinished: t.submitted - t.completed - t.failed, Latency: latencyOf(t.latency), FailureSamples: t.failSamples}
	if t.failed > 0 {
		r.UnexpectedErrors += t.failed
	}
}

// totals returns the successful and failed calls so far.
func (s *stats) totals() (ok, errs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.methods {
		ok += m.ok
		errs += m.errs
	}
	return ok, errs
}
