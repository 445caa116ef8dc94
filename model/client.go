package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Defaults applied by [New] to zero [Config] fields.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultIdleTimeout    = 120 * time.Second
	DefaultMaxRetries     = 2
)

// Config configures a [Client]. The zero value talks to api.openai.com without
// an API key, with the defaults above.
type Config struct {
	// BaseURL is the API root that "chat/completions" is appended to, e.g.
	// "http://127.0.0.1:8080/v1". Empty means https://api.openai.com/v1/.
	// Environment variables such as OPENAI_BASE_URL are NOT consulted.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>"; empty sends no
	// Authorization header (typical for local servers).
	APIKey string
	// ConnectTimeout bounds dialing, the TLS handshake and the wait for the
	// response headers of each attempt. Zero means DefaultConnectTimeout
	// (30s). Not applied when HTTPClient is set.
	ConnectTimeout time.Duration
	// IdleTimeout is the longest the client waits for the next bytes of the
	// response stream once the headers have arrived (time the caller spends
	// in onDelta does not count). Zero means DefaultIdleTimeout (120s).
	IdleTimeout time.Duration
	// MaxRetries is how many times a request is retried on HTTP 429, HTTP 503
	// or a transport failure before any response (never on 500, 502 or 504,
	// which may mean the request was processed). Zero means
	// DefaultMaxRetries (2); a negative value disables retries. Backoff is
	// exponential from 0.5s (capped at 8s, with jitter); a Retry-After header
	// is honoured up to 2 minutes. Context cancellation interrupts the wait.
	MaxRetries int
	// HTTPClient, when set, is used as is (tests, custom transports); the
	// caller then owns proxy and connect-timeout settings. When nil, a shared
	// transport with http.ProxyFromEnvironment and ConnectTimeout is used.
	HTTPClient *http.Client
	// WrapTransport, when set, wraps the transport of every HTTP attempt
	// (retries included), e.g. to count statuses and log failures.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Client streams chat completions from one OpenAI-compatible server. It is
// cheap to create, holds no goroutines, and is safe for concurrent use;
// clients with the same ConnectTimeout share one connection pool.
type Client struct {
	svc        openai.ChatCompletionService
	idle       time.Duration
	maxRetries int
	cfgErr     error

	// maxRetryDelay caps openai-go's retry backoff (and the Retry-After it
	// accepts); zero keeps openai-go's defaults. Tests set it to keep retries
	// fast.
	maxRetryDelay time.Duration
}

// New returns a Client for cfg. It never fails: a malformed BaseURL is
// reported by every [Client.Stream] call as [KindInvalidRequest].
func New(cfg Config) *Client {
	c := &Client{idle: cfg.IdleTimeout, maxRetries: cfg.MaxRetries}
	if c.idle <= 0 {
		c.idle = DefaultIdleTimeout
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	hc := cfg.HTTPClient
	if hc == nil {
		ct := cfg.ConnectTimeout
		if ct <= 0 {
			ct = DefaultConnectTimeout
		}
		hc = &http.Client{Transport: sharedTransport(ct)}
	}
	if cfg.WrapTransport != nil {
		wrapped := *hc
		if wrapped.Transport == nil {
			wrapped.Transport = http.DefaultTransport
		}
		wrapped.Transport = cfg.WrapTransport(wrapped.Transport)
		hc = &wrapped
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithEnvironmentProduction(),
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		switch {
		case err != nil:
			c.cfgErr = fmt.Errorf("base URL: %w", err)
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			c.cfgErr = fmt.Errorf("base URL %q: want http(s)://host[:port]/path", cfg.BaseURL)
		default:
			opts = append(opts, option.WithBaseURL(cfg.BaseURL))
		}
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	c.svc = openai.NewChatCompletionService(opts...)
	return c
}

var transports sync.Map // connect timeout -> *http.Transport

// sharedTransport returns the process-wide transport for a connect timeout.
func sharedTransport(connect time.Duration) *http.Transport {
	if t, ok := transports.Load(connect); ok {
		return t.(*http.Transport)
	}
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: connect,
		ExpectContinueTimeout: time.Second,
	}
	actual, _ := transports.LoadOrStore(connect, t)
	return actual.(*http.Transport)
}

// errIdle is the cancellation cause set when the stream goes silent.
var errIdle = errors.New("stream idle timeout")

// Stream sends req as a streamed chat completion (stream=true,
// stream_options.include_usage=true) and reads the reply to its end.
//
// onDelta, if not nil, is called synchronously, in order, with each
// non-empty text fragment as it arrives (content, the text parts of content
// sent as a list of parts, and refusal text if the model refuses; never
// reasoning). It is never called again for a fragment: requests are
// retried only before the response stream starts. Tool-call fragments are not
// passed to onDelta; they are accumulated into Response.ToolCalls.
//
// Stream returns the accumulated [Response] once the server signalled the
// end of the reply: a finish_reason or the [DONE] sentinel. After a
// finish_reason, a connection that drops or goes idle before the trailing
// usage chunk or [DONE] still yields the Response (Usage may then be nil).
// A stream that ends without either signal is [KindTruncated]; one in which
// the server reports an error, in any of the shapes listed in the package
// doc, is [KindStreamError], even after text.
//
// Every failure is an [*Error]; see [ErrorKind] for the cases. On error the
// Response is nil, even if text was already delivered to onDelta; the caller
// decides what to keep. Cancelling ctx aborts the request or stream promptly
// with [KindCancelled].
func (c *Client) Stream(ctx context.Context, req Request, onDelta func(text string)) (*Response, error) {
	if c.cfgErr != nil {
		return nil, &Error{Kind: KindInvalidRequest, Err: c.cfgErr}
	}
	params, err := buildParams(req)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, cancelled(ctx)
	}

	// sctx is cancelled with cause errIdle when the stream goes silent.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var raw *http.Response
	opts := []option.RequestOption{
		option.WithJSONSet("stream", true),
		option.WithResponseBodyInto(&raw), // keep the body unread: we decode it
		option.WithMaxRetries(c.maxRetries),
		option.WithMiddleware(retryPolicy),
	}
	if c.maxRetryDelay > 0 {
		opts = append(opts, option.WithMaxRetryDelay(c.maxRetryDelay))
	}
	if _, err := c.svc.New(sctx, params, opts...); err != nil {
		return nil, requestError(ctx, raw, err)
	}
	if raw == nil || raw.Body == nil {
		return nil, &Error{Kind: KindBadResponse, Err: errors.New("no response")}
	}
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		return nil, statusError(raw)
	}

	body := newWatchedBody(raw.Body, c.idle, func() { cancel(errIdle) })
	raw.Body = body
	defer body.Close()
	dec := newEventDecoder(body)

	var acc accumulator
	sawDone := false
	for !sawDone && dec.Next() {
		ev := dec.Event()
		if fail := acc.event(ev, onDelta); fail != nil {
			if fail.done {
				sawDone = true
				continue
			}
			return nil, fail.error(raw.StatusCode)
		}
	}
	if !sawDone {
		if err := dec.Err(); err != nil || sctx.Err() != nil {
			e := c.streamError(ctx, sctx, raw.StatusCode, err)
			// The reply itself is complete once a finish_reason arrived; losing
			// the connection (or waiting in vain) for the trailing usage chunk
			// or [DONE] after that does not fail the call.
			if acc.finish != "" && (e.Kind == KindTimeout || e.Kind == KindTruncated) {
				return acc.response(), nil
			}
			return nil, e
		}
	}
	if !sawDone && acc.finish == "" {
		if ctx.Err() != nil {
			return nil, cancelled(ctx)
		}
		if dec.events == 0 && !looksLikeSSE(body.head, body.n > int64(len(body.head))) {
			return nil, &Error{Kind: KindBadResponse, Status: raw.StatusCode, Body: capBody(body.head),
				Err: fmt.Errorf("not an event stream (Content-Type %q)", raw.Header.Get("Content-Type"))}
		}
		return nil, &Error{Kind: KindTruncated, Status: raw.StatusCode}
	}
	return acc.response(), nil
}

var quotedError = []byte(`"error"`)

// eventOutcome is what one event means for the stream when it is not a
// plain chunk: the end ([DONE]), or a failure.
type eventOutcome struct {
	done   bool
	kind   ErrorKind
	body   []byte
	reason string
}

func (o *eventOutcome) error(status int) *Error {
	var err error
	if o.reason != "" {
		err = errors.New(o.reason)
	}
	return &Error{Kind: o.kind, Status: status, Body: capBody(o.body), Err: err}
}

// event folds one server-sent event into the accumulator. It returns nil
// for a chunk, done for [DONE], and a failure for an error the server
// reported in any of the shapes servers use (see the package doc) or for
// data that is not a chat completion chunk.
func (a *accumulator) event(ev sseEvent, onDelta func(string)) *eventOutcome {
	if len(ev.ErrField) > 0 {
		return &eventOutcome{kind: KindStreamError, body: ev.ErrField, reason: "error field in the event stream"}
	}
	if ev.Type == "error" {
		return &eventOutcome{kind: KindStreamError, body: ev.Data, reason: "error event"}
	}
	data := bytes.TrimSpace(ev.Data)
	if bytes.HasPrefix(data, doneSentinel) {
		return &eventOutcome{done: true}
	}
	// An "error" key or value appears unescaped in the data only as JSON
	// syntax, never inside a string: ordinary chunks skip the probe.
	if bytes.Contains(data, quotedError) {
		var probe struct {
			Error  json.RawMessage `json:"error"`
			Object string          `json:"object"`
		}
		if err := json.Unmarshal(data, &probe); err != nil {
			return &eventOutcome{kind: KindBadResponse, body: ev.Data,
				reason: fmt.Sprintf("event data is not a chat completion chunk: %v", err)}
		}
		if isError(probe.Error) {
			return &eventOutcome{kind: KindStreamError, body: data, reason: "error object in a chunk"}
		}
		if probe.Object == "error" {
			return &eventOutcome{kind: KindStreamError, body: data, reason: `chunk with object "error"`}
		}
	}
	var chunk openai.ChatCompletionChunk
	if err := json.Unmarshal(data, &chunk); err != nil {
		return &eventOutcome{kind: KindBadResponse, body: ev.Data,
			reason: fmt.Sprintf("event data is not a chat completion chunk: %v", err)}
	}
	if fail := a.add(&chunk, onDelta); fail != nil {
		return &eventOutcome{kind: KindStreamError, body: fail.body, reason: fail.reason}
	}
	return nil
}

// retryPolicy narrows openai-go's retry decision (408, 409, 429, 5xx,
// transport errors, or whatever x-should-retry says) to 429 and 503 (the
// server says it did not take the request: retry later) and transport
// errors before any response. 500, 502 and 504 are not retried: the server
// or the upstream behind a gateway may have processed the request, and an
// input must not reach the model twice. A 429/503 carrying
// "x-should-retry: false" is not retried.
func retryPolicy(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil {
		return res, err
	}
	if res.Header == nil {
		res.Header = http.Header{}
	}
	switch {
	case res.StatusCode < 400:
		res.Header.Del("X-Should-Retry") // never retry a response that may be streaming
	case res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusServiceUnavailable:
		res.Header.Set("X-Should-Retry", "false")
	}
	return res, err
}

func cancelled(ctx context.Context) *Error {
	return &Error{Kind: KindCancelled, Err: context.Cause(ctx)}
}

// requestError classifies a failure before a 2xx response was obtained.
func requestError(ctx context.Context, raw *http.Response, err error) *Error {
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if raw != nil && raw.StatusCode >= 300 {
		return statusError(raw)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Kind: KindTimeout, Err: err}
	}
	return &Error{Kind: KindConnection, Err: err}
}

// statusError reads (a capped prefix of) a non-2xx reply and closes it.
func statusError(raw *http.Response) *Error {
	e := &Error{Kind: KindHTTPStatus, Status: raw.StatusCode}
	if raw.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(raw.Body, MaxErrorBody+utf8Slack))
		_ = raw.Body.Close()
		e.Body = capBody(b)
	}
	return e
}

// utf8Slack lets capBody see whether the cut splits a rune.
const utf8Slack = 4

// streamError classifies a failure while reading a 2xx event stream.
func (c *Client) streamError(ctx, sctx context.Context, status int, derr error) *Error {
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if errors.Is(context.Cause(sctx), errIdle) {
		return &Error{Kind: KindTimeout, Status: status,
			Err: fmt.Errorf("no data from the server for %s (idle timeout)", c.idle)}
	}
	// Reading the body failed: reset, unexpected EOF, or a line over the
	// 32 MiB limit.
	if errors.Is(derr, errTooLong) {
		return &Error{Kind: KindBadResponse, Status: status, Err: derr}
	}
	return &Error{Kind: KindTruncated, Status: status, Err: derr}
}
