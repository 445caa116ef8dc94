package protocol

import (
	"errors"
	"fmt"
)

// JSON-RPC 2.0 error codes (https://www.jsonrpc.org/specification#error_object)
// and sessiond's one server code for refusals of well-formed requests.
const (
	CodeParseError     = -32700 // the frame is not valid JSON
	CodeInvalidRequest = -32600 // valid JSON but not a JSON-RPC request object
	CodeMethodNotFound = -32601 // no such method
	CodeInvalidParams  = -32602 // params are not an object or fail validation
	CodeInternal       = -32603 // a bug or an unexpected failure
	CodeRefused        = -32000 // a well-formed request refused; see Reason
)

// Reason is the machine-readable error.data.reason of PROTOCOL.md section 3.
type Reason string

// The reasons of PROTOCOL.md section 3.
const (
	ReasonInvalidParams      Reason = "invalid_params"
	ReasonNotFound           Reason = "not_found"
	ReasonStaleGeneration    Reason = "stale_generation"
	ReasonUnknownExecution   Reason = "unknown_execution"
	ReasonAdmissionConflict  Reason = "admission_conflict"
	ReasonCancelled          Reason = "cancelled"
	ReasonNotQueued          Reason = "not_queued"
	ReasonDraining           Reason = "draining"
	ReasonStorageUnavailable Reason = "storage_unavailable"
	ReasonOverloaded         Reason = "overloaded"
	ReasonSessionBusy        Reason = "session_busy"
	// ReasonNotTerminal: session.fork through an admission that is not
	// terminal.
	ReasonNotTerminal Reason = "not_terminal"
	// ReasonForbidden: the connection's paired token's scope does not allow
	// the method (read-only, or an owner-only method), or pairing refused.
	ReasonForbidden Reason = "forbidden"
	// reasons for the standard codes, so every error carries one
	ReasonParseError     Reason = "parse_error"
	ReasonInvalidRequest Reason = "invalid_request"
	ReasonMethodNotFound Reason = "method_not_found"
	ReasonInternal       Reason = "internal"
)

// Error is a JSON-RPC error object carrying its wire meaning. Handlers return
// it (possibly wrapped with %w); the dispatcher finds it with errors.As and
// sends Code, Message and Data (with "reason" set from Reason). Two Errors
// match under errors.Is when their reasons are equal, so
// errors.Is(err, protocol.ErrNotFound) works on any wrapped not_found error.
type Error struct {
	Code    int
	Reason  Reason
	Message string
	// Data holds helpful extra fields (admission_id, execution_generation,
	// …); "reason" is added on the wire.
	Data map[string]any
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Reason)
	}
	return e.Message
}

// Is reports whether target is an *Error with the same Reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// With returns a copy of e with key=value added to Data.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Data = make(map[string]any, len(e.Data)+1)
	for k, v := range e.Data {
		c.Data[k] = v
	}
	c.Data[key] = value
	return &c
}

// Sentinel errors, one per reason; compare with errors.Is.
var (
	ErrInvalidParams      = &Error{Code: CodeInvalidParams, Reason: ReasonInvalidParams}
	ErrNotFound           = &Error{Code: CodeRefused, Reason: ReasonNotFound}
	ErrStaleGeneration    = &Error{Code: CodeRefused, Reason: ReasonStaleGeneration}
	ErrUnknownExecution   = &Error{Code: CodeRefused, Reason: ReasonUnknownExecution}
	ErrAdmissionConflict  = &Error{Code: CodeRefused, Reason: ReasonAdmissionConflict}
	ErrCancelled          = &Error{Code: CodeRefused, Reason: ReasonCancelled}
	ErrNotQueued          = &Error{Code: CodeRefused, Reason: ReasonNotQueued}
	ErrDraining           = &Error{Code: CodeRefused, Reason: ReasonDraining}
	ErrStorageUnavailable = &Error{Code: CodeRefused, Reason: ReasonStorageUnavailable}
	ErrOverloaded         = &Error{Code: CodeRefused, Reason: ReasonOverloaded}
	ErrSessionBusy        = &Error{Code: CodeRefused, Reason: ReasonSessionBusy}
	ErrNotTerminal        = &Error{Code: CodeRefused, Reason: ReasonNotTerminal}
)

// Errorf returns a new Error with the reason's code and a formatted message.
// ReasonInvalidParams uses -32602; the standard reasons use their codes;
// every other reason uses -32000.
func Errorf(reason Reason, format string, args ...any) *Error {
	return &Error{Code: codeFor(reason), Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func codeFor(r Reason) int {
	switch r {
	case ReasonInvalidParams:
		return CodeInvalidParams
	case ReasonParseError:
		return CodeParseError
	case ReasonInvalidRequest:
		return CodeInvalidRequest
	case ReasonMethodNotFound:
		return CodeMethodNotFound
	case ReasonInternal:
		return CodeInternal
	}
	return CodeRefused
}

// AsError converts any handler error to the wire error: an *Error found with
// errors.As keeps its code and reason and takes the outer message (so
// context added with %w reaches people); anything else is -32603 internal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Message = err.Error()
		return &c
	}
	return &Error{Code: CodeInternal, Reason: ReasonInternal, Message: err.Error()}
}

// Reasons lists every reason in the order of PROTOCOL.md section 3, for the
// schema and for clients that switch on error.data.reason.
var Reasons = []Reason{
	ReasonInvalidParams, ReasonNotFound, ReasonStaleGeneration, ReasonUnknownExecution,
	ReasonAdmissionConflict, ReasonCancelled, ReasonNotQueued, ReasonDraining,
	ReasonStorageUnavailable, ReasonOverloaded, ReasonSessionBusy, ReasonNotTerminal, ReasonForbidden,
	ReasonParseError, ReasonInvalidRequest, ReasonMethodNotFound, ReasonInternal,
}

// InvalidParams returns an invalid_params error (-32602) about field, whose
// message is "invalid params: FIELD: DETAIL" and whose data.field is field.
func InvalidParams(field, format string, args ...any) *Error {
	return Errorf(ReasonInvalidParams, "invalid params: %s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}

// Refuse returns an *Error with reason's code whose message is err's text and
// which wraps nothing: lower packages use it to give a domain error its wire
// reason, e.g. var ErrNotQueued = protocol.Refuse(ReasonNotQueued, "admission
// is no longer queued").
func Refuse(reason Reason, message string) *Error {
	return &Error{Code: codeFor(reason), Reason: reason, Message: message}
}
