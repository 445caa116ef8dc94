package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/protocol"
)

// ProtocolVersion is the protocol number of PROTOCOL.md (v1).
const ProtocolVersion = protocol.Version

// Method names: see package protocol.
const (
	MethodInitialize      = protocol.MethodInitialize
	MethodDaemonInfo      = protocol.MethodDaemonInfo
	MethodSessionCreate   = protocol.MethodSessionCreate
	MethodSessionResume   = protocol.MethodSessionResume
	MethodSessionMessages = protocol.MethodSessionMessages
	MethodSessionList     = protocol.MethodSessionList
	MethodPromptSubmit    = protocol.MethodPromptSubmit
	MethodPromptCancel    = protocol.MethodPromptCancel
	MethodInterrupt       = protocol.MethodInterrupt
	MethodResolveUnknown  = protocol.MethodResolveUnknown
	MethodApprovalRespond = protocol.MethodApprovalRespond
	MethodClarifyRespond  = protocol.MethodClarifyRespond
	MethodApprovalsList   = protocol.MethodApprovalsList
	MethodSessionUpdate   = protocol.MethodSessionUpdate
	MethodSessionDelete   = protocol.MethodSessionDelete
	MethodApprovalsRevoke = protocol.MethodApprovalsRevoke
	NotifySessionEvent    = protocol.NotifySessionEvent

	// Pairing (PROTOCOL.md section 2, docs/protocol.md "Paired clients").
	MethodPairingCode   = protocol.MethodPairingCode   // owner only
	MethodPair          = protocol.MethodPair          // GET /pair only
	MethodClientsList   = protocol.MethodClientsList   // owner only
	MethodClientsRevoke = protocol.MethodClientsRevoke // owner only
)

// Decode unmarshals params into v. A missing params value decodes as {}.
// Wrong JSON types come back as ErrInvalidParams naming the field, e.g.
// `invalid params: "cwd" must be string, not number`. Unknown fields are
// ignored so that newer clients work with older daemons, but member names
// are case-sensitive: a name that differs from a field of v only by case
// ("Session_ID") is refused with invalid_params naming it, where
// encoding/json alone would silently take it for the field.
func Decode(params json.RawMessage, v any) error {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := checkMemberCase(params, v); err != nil {
		return err
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return Errorf(ReasonInvalidParams, "invalid params: %q must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value).With("field", field)
		}
		return Errorf(ReasonInvalidParams, "invalid params: %v", err)
	}
	if v, ok := v.(protocol.Validator); ok {
		return v.Validate()
	}
	return nil
}

// fieldNames caches, per struct type, the JSON member names of its fields.
var fieldNames sync.Map // reflect.Type → map[string]bool

// checkMemberCase refuses a top-level member of the params object whose
// name matches a field of *v only case-insensitively.
func checkMemberCase(params json.RawMessage, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	// Walk the top-level member names only, skipping their values: no
	// map is built, whatever the object's size.
	dec := json.NewDecoder(bytes.NewReader(params))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: json.Unmarshal reports it
	}
	names := structNames(t.Elem())
	var skip json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		m, _ := tok.(string)
		if !names[m] {
			for n := range names {
				if strings.EqualFold(m, n) {
					return Errorf(ReasonInvalidParams, "invalid params: unknown member %q; member names are case-sensitive: did you mean %q?", m, n).With("field", m)
				}
			}
		}
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

func structNames(t reflect.Type) map[string]bool {
	if n, ok := fieldNames.Load(t); ok {
		return n.(map[string]bool)
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	fieldNames.Store(t, names)
	return names
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case goKind == "slice", goKind == "array":
		return "an array"
	case goKind == "map", goKind == "struct", goKind == "ptr":
		return "an object"
	}
	return goKind
}

// InvalidParams returns an invalid_params error (-32602) about field.
func InvalidParams(field, format string, args ...any) *Error {
	return protocol.InvalidParams(field, format, args...)
}

// The wire types live in package protocol; these aliases keep rpc.X working.
type (
	ClientInfo            = protocol.ClientInfo
	InitializeParams      = protocol.InitializeParams
	InitializeResult      = protocol.InitializeResult
	DaemonInfo            = protocol.DaemonInfo
	SandboxInfo           = protocol.SandboxInfo
	SandboxParams         = protocol.SandboxParams
	StorageInfo           = protocol.StorageInfo
	ClusterInfo           = protocol.ClusterInfo
	SessionCreateParams   = protocol.SessionCreateParams
	SessionRef            = protocol.SessionRef
	ResumeParams          = protocol.ResumeParams
	Message               = protocol.Message
	Prompt                = protocol.Prompt
	Receipt               = protocol.Receipt
	Snapshot              = protocol.Snapshot
	SessionListParams     = protocol.SessionListParams
	SessionSummary        = protocol.SessionSummary
	SessionList           = protocol.SessionList
	SubmitParams          = protocol.SubmitParams
	AdmissionRef          = protocol.AdmissionRef
	ResolveUnknownParams  = protocol.ResolveUnknownParams
	InterruptParams       = protocol.InterruptParams
	InterruptResult       = protocol.InterruptResult
	RespondParams         = protocol.RespondParams
	RespondResult         = protocol.RespondResult
	Event                 = protocol.Event
	ApprovalsListParams   = protocol.ApprovalsListParams
	AllowRule             = protocol.AllowRule
	ApprovalsList         = protocol.ApprovalsList
	RespondStatus         = protocol.RespondStatus
	EventType             = protocol.EventType
	MessagesParams        = protocol.MessagesParams
	MessagesResult        = protocol.MessagesResult
	SessionUpdateParams   = protocol.SessionUpdateParams
	SessionDeleteParams   = protocol.SessionDeleteParams
	SessionDeleteResult   = protocol.SessionDeleteResult
	ApprovalsRevokeParams = protocol.ApprovalsRevokeParams
	ApprovalsRevokeResult = protocol.ApprovalsRevokeResult
	AdmissionStatus       = protocol.AdmissionStatus
	Choice                = protocol.Choice
	AnsweredBy            = protocol.AnsweredBy
	Sender                = protocol.Sender
	PairingCodeParams     = protocol.PairingCodeParams
	PairingCodeResult     = protocol.PairingCodeResult
	PairParams            = protocol.PairParams
	PairResult            = protocol.PairResult
	ClientsListParams     = protocol.ClientsListParams
	PairedClient          = protocol.PairedClient
	ClientsList           = protocol.ClientsList
	ClientRef             = protocol.ClientRef
	RevokeResult          = protocol.RevokeResult
)

// SenderOwner is Sender.ID for the daemon's own token (daemon.json).
const SenderOwner = protocol.SenderOwner

// DecodeSender parses a stored sender (protocol.DecodeSender).
func DecodeSender(raw []byte) *Sender { return protocol.DecodeSender(raw) }
