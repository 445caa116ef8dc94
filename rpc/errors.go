package rpc

import "github.com/sessiond/sessiond/protocol"

// The error vocabulary lives in package protocol; these names keep rpc.X
// working.
const (
	CodeParseError     = protocol.CodeParseError
	CodeInvalidRequest = protocol.CodeInvalidRequest
	CodeMethodNotFound = protocol.CodeMethodNotFound
	CodeInvalidParams  = protocol.CodeInvalidParams
	CodeInternal       = protocol.CodeInternal
	CodeRefused        = protocol.CodeRefused
)

// Reason is the machine-readable error.data.reason of PROTOCOL.md section 3.
type Reason = protocol.Reason

// Error is the refusal error type (protocol.Error).
type Error = protocol.Error

// The reasons of PROTOCOL.md section 3.
const (
	ReasonInvalidParams      = protocol.ReasonInvalidParams
	ReasonNotFound           = protocol.ReasonNotFound
	ReasonStaleGeneration    = protocol.ReasonStaleGeneration
	ReasonUnknownExecution   = protocol.ReasonUnknownExecution
	ReasonAdmissionConflict  = protocol.ReasonAdmissionConflict
	ReasonCancelled          = protocol.ReasonCancelled
	ReasonNotQueued          = protocol.ReasonNotQueued
	ReasonDraining           = protocol.ReasonDraining
	ReasonStorageUnavailable = protocol.ReasonStorageUnavailable
	ReasonOverloaded         = protocol.ReasonOverloaded
	ReasonSessionBusy        = protocol.ReasonSessionBusy
	ReasonForbidden          = protocol.ReasonForbidden
	ReasonParseError         = protocol.ReasonParseError
	ReasonInvalidRequest     = protocol.ReasonInvalidRequest
	ReasonMethodNotFound     = protocol.ReasonMethodNotFound
	ReasonInternal           = protocol.ReasonInternal
)

// Sentinel errors, one per reason; compare with errors.Is.
var (
	ErrInvalidParams      = protocol.ErrInvalidParams
	ErrNotFound           = protocol.ErrNotFound
	ErrStaleGeneration    = protocol.ErrStaleGeneration
	ErrUnknownExecution   = protocol.ErrUnknownExecution
	ErrAdmissionConflict  = protocol.ErrAdmissionConflict
	ErrCancelled          = protocol.ErrCancelled
	ErrNotQueued          = protocol.ErrNotQueued
	ErrDraining           = protocol.ErrDraining
	ErrStorageUnavailable = protocol.ErrStorageUnavailable
	ErrOverloaded         = protocol.ErrOverloaded
	ErrSessionBusy        = protocol.ErrSessionBusy
)

// Errorf returns a new Error with the reason's code (protocol.Errorf).
func Errorf(reason Reason, format string, args ...any) *Error {
	return protocol.Errorf(reason, format, args...)
}

// AsError converts any handler error to the wire error (protocol.AsError).
func AsError(err error) *Error { return protocol.AsError(err) }
