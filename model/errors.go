package model

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ErrorKind classifies an [*Error]. The values are stable strings that may be
// shown to clients or stored.
type ErrorKind string

const (
	// KindHTTPStatus: the server answered with a non-2xx status (after any
	// retries). Error.Status holds the status code and Error.Body the
	// server's reply text.
	KindHTTPStatus ErrorKind = "http_status"
	// KindTruncated: the response stream ended (EOF, reset, empty body)
	// before the server sent a finish_reason or the [DONE] sentinel. Text
	// already passed to onDelta is not retracted; the reply is incomplete.
	// Error.Err is the read error, if any (e.g. io.ErrUnexpectedEOF).
	KindTruncated ErrorKind = "truncated"
	// KindBadResponse: a 2xx reply that is not a usable event stream: a
	// non-SSE body (HTML, a plain JSON object), an event whose data is not
	// JSON, or an oversized line. Error.Body holds the offending text.
	KindBadResponse ErrorKind = "bad_response"
	// KindStreamError: the server reported an error inside a 2xx event
	// stream, possibly after partial text: an "error" object in a chunk
	// (OpenAI, vLLM, LiteLLM, OpenRouter, Groq, Ollama, llama.cpp), a chunk
	// with "object": "error" (older vLLM), an "error" on a choice, a
	// finish_reason naming a failure ("error", "abort", ...), an SSE
	// "event: error", or a non-standard "error:" field (older llama.cpp).
	// Error.Body holds the server's text (Error() shows its message);
	// Error.Err says which shape it came in. Text already passed to onDelta
	// is not part of any Response: the reply failed.
	KindStreamError ErrorKind = "stream_error"
	// KindTimeout: connecting, the TLS handshake or waiting for response
	// headers took longer than Config.ConnectTimeout, or the stream was
	// silent for longer than Config.IdleTimeout.
	KindTimeout ErrorKind = "timeout"
	// KindConnection: the server could not be reached or the connection
	// failed before a response arrived (refused, reset, DNS, TLS).
	KindConnection ErrorKind = "connection"
	// KindCancelled: the caller's context was cancelled or its deadline
	// passed. Error.Err is the context's cause (errors.Is(err,
	// context.Canceled) or context.DeadlineExceeded holds).
	KindCancelled ErrorKind = "cancelled"
	// KindInvalidRequest: the Request or Config cannot be sent (unknown
	// message role, tool message without tool_call_id, tool parameters that
	// are not a JSON object, unparsable BaseURL). Nothing was sent.
	KindInvalidRequest ErrorKind = "invalid_request"
)

// MaxErrorBody is the maximum number of bytes of server text kept in
// [Error.Body] (cut on a UTF-8 boundary).
const MaxErrorBody = 2048

// Error is returned by [Client.Stream] for every failure.
//
// Kind says what happened. Status is the HTTP status code when a response
// was received (0 otherwise). Body is the server's own text (response body,
// offending event data), at most [MaxErrorBody] bytes. Err is the underlying
// cause when there is one (transport error, context cause, decode error); it
// is returned by Unwrap, so errors.Is(err, context.Canceled) works.
//
// Error() is meant for people: it names the kind and includes the server's
// message (the "error.message" of a JSON error body, else the body text).
type Error struct {
	Kind   ErrorKind
	Status int
	Body   string
	Err    error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model: ")
	switch e.Kind {
	case KindHTTPStatus:
		fmt.Fprintf(&b, "server replied HTTP %d", e.Status)
		if t := http.StatusText(e.Status); t != "" {
			b.WriteString(" " + t)
		}
	case KindTruncated:
		b.WriteString("response truncated: the stream ended before completion (no finish_reason and no [DONE])")
	case KindBadResponse:
		b.WriteString("unusable response from server")
	case KindStreamError:
		b.WriteString("the server reported an error in the stream")
	case KindTimeout:
		b.WriteString("timed out")
	case KindConnection:
		b.WriteString("cannot reach model server")
	case KindCancelled:
		b.WriteString("request cancelled")
	case KindInvalidRequest:
		b.WriteString("invalid request")
	default:
		b.WriteString(string(e.Kind))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if msg := serverMessage(e.Body); msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// capBody replaces invalid UTF-8 in b with U+FFFD and trims the result to
// at most MaxErrorBody bytes without splitting a UTF-8 sequence.
func capBody(b []byte) string {
	// Replace first: each invalid byte becomes a 3-byte U+FFFD, so cutting
	// first could exceed MaxErrorBody.
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > MaxErrorBody {
		s = s[:MaxErrorBody]
		// Drop a trailing partial rune.
		for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
			r, size := utf8.DecodeLastRuneInString(s)
			if r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	return s
}

// serverMessage extracts a human message from a server body: the
// "error.message" (or "error", "message", "detail") of a JSON body, else the
// trimmed text itself.
func serverMessage(body string) string {
	body = strings.TrimSpace(body)
	if body == "" {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal([]byte(body), &v) == nil {
		if len(v.Error) > 0 {
			var inner struct {
				Message string `json:"message"`
			}
			var s string
			if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
				return inner.Message
			}
			if json.Unmarshal(v.Error, &s) == nil && s != "" {
				return s
			}
		}
		if v.Message != "" {
			return v.Message
		}
		var s string
		if json.Unmarshal(v.Detail, &s) == nil && s != "" {
			return s
		}
	}
	return body
}
