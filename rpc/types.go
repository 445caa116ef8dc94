package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// ProtocolVersion is the protocol number of PROTOCOL.md (v1).
const ProtocolVersion = 1

// Method names (PROTOCOL.md section 4) and the one notification (section 6).
const (
	MethodInitialize      = "initialize"
	MethodDaemonInfo      = "daemon.info"
	MethodSessionCreate   = "session.create"
	MethodSessionResume   = "session.resume"
	MethodSessionList     = "session.list"
	MethodPromptSubmit    = "prompt.submit"
	MethodPromptCancel    = "prompt.cancel"
	MethodInterrupt       = "session.interrupt"
	MethodResolveUnknown  = "prompt.resolve_unknown"
	MethodApprovalRespond = "approval.respond"
	MethodClarifyRespond  = "clarify.respond"
	MethodApprovalsList   = "approvals.list"
	MethodSessionUpdate   = "session.update"
	MethodSessionDelete   = "session.delete"
	MethodApprovalsRevoke = "approvals.revoke"
	NotifySessionEvent    = "session.event"

	// Pairing (PROTOCOL.md section 2, docs/protocol.md "Paired clients").
	MethodPairingCode   = "auth.pairing_code" // owner only
	MethodPair          = "auth.pair"         // GET /pair only
	MethodClientsList   = "clients.list"      // owner only
	MethodClientsRevoke = "clients.revoke"    // owner only
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
	return Errorf(ReasonInvalidParams, "invalid params: %s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}

// ClientInfo names a client in initialize.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeParams are the params of initialize.
type InitializeParams struct {
	Client   ClientInfo `json:"client"`
	Protocol *int       `json:"protocol,omitempty"`
}

// InitializeResult is the result of initialize.
type InitializeResult struct {
	Protocol  int    `json:"protocol"`
	Version   string `json:"version"`
	BootEpoch int64  `json:"boot_epoch"`
}

// DaemonInfo is the result of daemon.info.
type DaemonInfo struct {
	Version      string `json:"version"`
	Protocol     int    `json:"protocol"`
	PID          int    `json:"pid"`
	BootEpoch    int64  `json:"boot_epoch"`
	StartedAt    string `json:"started_at"`
	Home         string `json:"home"`
	Sessions     int64  `json:"sessions"`
	RunningTurns int    `json:"running_turns"`
	// HeldSessions counts the sessions whose queue an unknown admission
	// holds (left by a crash, until prompt.resolve_unknown); OpenPrompts
	// the approvals and clarifications waiting for an answer, daemon-wide.
	HeldSessions int64 `json:"held_sessions"`
	OpenPrompts  int64 `json:"open_prompts"`
	// Storage is the state of state.db's WAL as of the last periodic
	// checkpoint (docs/protocol.md Part 2, section F).
	Storage StorageInfo `json:"storage"`
	// Sandbox is the configured sandbox of new sessions and whether this
	// kernel can enforce it.
	Sandbox SandboxInfo `json:"sandbox"`
}

// SandboxInfo describes a sandbox: in daemon.info the configured one, in
// a snapshot and in every approval prompt the session's (frozen at
// creation). Mode is workspace-write, read-only or off; Network says
// whether TCP/UDP are allowed; WritableRoots are the directories writable
// besides the cwd (workspace-write). Available is true when commands are
// confined as Mode says; when false, Reason says why (mode off, or what
// the kernel lacks; then every command needs approval unless the config
// says mode off).
type SandboxInfo struct {
	Mode          string   `json:"mode"`
	Network       bool     `json:"network"`
	WritableRoots []string `json:"writable_roots"`
	Available     bool     `json:"available"`
	Reason        string   `json:"reason,omitempty"`
}

// SandboxParams is session.create's sandbox: each field may only narrow
// the configured sandbox (a more confined mode, network off, writable
// roots inside the configured ones); an omitted field keeps the
// configured value. Widening is invalid_params naming the field.
type SandboxParams struct {
	Mode          string   `json:"mode,omitempty"`
	Network       *bool    `json:"network,omitempty"`
	WritableRoots []string `json:"writable_roots,omitempty"`
}

// StorageInfo is daemon.info's storage member. WALBytes is the size of
// state.db-wal at the last checkpoint (RFC 3339 LastCheckpointAt, empty
// before the first); CheckpointBusy says that checkpoint did not run because
// another process was checkpointing the same file; CheckpointError is set
// while checkpoints fail (state.db cannot be written: commits still land
// durably in the WAL, which grows). See docs/protocol.md Part 2 F.
type StorageInfo struct {
	WALBytes         int64  `json:"wal_bytes"`
	LastCheckpointAt string `json:"last_checkpoint_at,omitempty"`
	CheckpointBusy   bool   `json:"checkpoint_busy,omitempty"`
	CheckpointError  string `json:"checkpoint_error,omitempty"`
}

// SessionCreateParams are the params of session.create. Toolsets nil means
// the default ["terminal","clarify"]; an empty list means no tools.
type SessionCreateParams struct {
	Cwd       string    `json:"cwd"`
	Model     string    `json:"model,omitempty"`
	Provider  string    `json:"provider,omitempty"`
	BaseURL   string    `json:"base_url,omitempty"`
	Toolsets  *[]string `json:"toolsets,omitempty"`
	Title     string    `json:"title,omitempty"`
	Source    string    `json:"source,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	// Sandbox narrows the configured sandbox for this session; the daemon
	// replaces it with the session's resulting sandbox before storing.
	Sandbox *SandboxParams `json:"sandbox,omitempty"`
}

// SessionRef is {session_id}.
type SessionRef struct {
	SessionID string `json:"session_id"`
}

// ResumeParams are the params of session.resume.
type ResumeParams struct {
	SessionID string `json:"session_id"`
	AfterSeq  *int64 `json:"after_seq,omitempty"`
}

// Message is one transcript entry in a snapshot. Role is user, assistant,
// tool or boundary (a boundary closes a turn lost in a crash and is never
// sent to the model).
type Message struct {
	ID          int64           `json:"id"`
	Role        string          `json:"role"`
	Content     string          `json:"content"`
	AdmissionID string          `json:"admission_id,omitempty"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	Kind        string          `json:"kind,omitempty"`
	CreatedAt   string          `json:"created_at"`
	Sender      *Sender         `json:"sender,omitempty"` // user messages: who admitted the input
}

// Prompt is an open approval or clarify prompt of the live execution.
type Prompt struct {
	PromptID            string          `json:"prompt_id"`
	SessionID           string          `json:"session_id"`
	Kind                string          `json:"kind"`
	ExecutionGeneration int64           `json:"execution_generation"`
	AdmissionID         string          `json:"admission_id"`
	Payload             json.RawMessage `json:"payload"`
	CreatedAt           string          `json:"created_at"`
	ExpiresAt           string          `json:"expires_at,omitempty"`
}

// Receipt describes one admission (PROTOCOL.md section 4, prompt.submit).
// Outcome is null until Status is terminal; ExecutionGeneration is null
// until the admission started. Reason says why a queued admission waits:
// busy, capacity or unknown. Text is filled in snapshot pending lists only.
type Receipt struct {
	AdmissionID         string  `json:"admission_id"`
	SessionID           string  `json:"session_id"`
	InputID             string  `json:"input_id"`
	Seq                 int64   `json:"seq"`
	Status              string  `json:"status"`
	Outcome             *string `json:"outcome"`
	ExecutionGeneration *int64  `json:"execution_generation"`
	Reason              string  `json:"reason,omitempty"`
	Error               string  `json:"error,omitempty"`
	Duplicate           bool    `json:"duplicate"`
	Text                string  `json:"text,omitempty"`
	CreatedAt           string  `json:"created_at,omitempty"`
	Sender              *Sender `json:"sender,omitempty"`      // who submitted it; absent for pre-pairing rows
	ResolvedBy          *Sender `json:"resolved_by,omitempty"` // who resolved it after a crash (prompt.resolve_unknown)
}

// Snapshot is the result of session.create and session.resume.
type Snapshot struct {
	SessionID string   `json:"session_id"`
	Title     string   `json:"title"`
	Cwd       string   `json:"cwd"`
	Model     string   `json:"model"`
	Provider  string   `json:"provider"`
	BaseURL   string   `json:"base_url"`
	Toolsets  []string `json:"toolsets"`
	Source    string   `json:"source,omitempty"`
	CreatedAt string   `json:"created_at"`
	// Sandbox is the session's sandbox, frozen at creation.
	Sandbox             SandboxInfo `json:"sandbox"`
	ExecutionGeneration int64       `json:"execution_generation"`
	Running             *string     `json:"running"`
	Messages            []Message   `json:"messages"`
	Prompts             []Prompt    `json:"prompts"`
	Pending             []Receipt   `json:"pending"`
	LastSeq             int64       `json:"last_seq"`
	Events              []Event     `json:"events,omitempty"`
	SnapshotRequired    bool        `json:"snapshot_required,omitempty"`
}

// SessionListParams are the params of session.list. Limit defaults to 50
// and is capped at 500; Cursor is the next_cursor of the previous page.
type SessionListParams struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// SessionSummary is one row of session.list. Running is the admission id
// of the running turn (null when none); PendingCount counts the admissions
// not yet terminal (queued, started, unknown), UnknownCount those left
// unknown by a crash (the queue is held until prompt.resolve_unknown), and
// OpenPromptCount the approvals and clarifications waiting for an answer.
// See docs/protocol.md Part 2 A.
type SessionSummary struct {
	SessionID       string  `json:"session_id"`
	Title           string  `json:"title"`
	Cwd             string  `json:"cwd"`
	CreatedAt       string  `json:"created_at"`
	Running         *string `json:"running"`
	PendingCount    int64   `json:"pending_count"`
	UnknownCount    int64   `json:"unknown_count"`
	OpenPromptCount int64   `json:"open_prompt_count"`
}

// SessionList is the result of session.list.
type SessionList struct {
	Sessions   []SessionSummary `json:"sessions"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// SubmitParams are the params of prompt.submit.
type SubmitParams struct {
	SessionID   string          `json:"session_id"`
	InputID     string          `json:"input_id"`
	Text        string          `json:"text"`
	Attachments json.RawMessage `json:"attachments,omitempty"`
}

// AdmissionRef names one admission: prompt.cancel.
type AdmissionRef struct {
	SessionID   string `json:"session_id"`
	AdmissionID string `json:"admission_id"`
}

// ResolveUnknownParams are the params of prompt.resolve_unknown.
type ResolveUnknownParams struct {
	SessionID           string `json:"session_id"`
	AdmissionID         string `json:"admission_id"`
	ExecutionGeneration *int64 `json:"execution_generation"`
}

// InterruptParams are the params of session.interrupt.
type InterruptParams struct {
	SessionID           string `json:"session_id"`
	ExecutionGeneration *int64 `json:"execution_generation,omitempty"`
}

// InterruptResult is the result of session.interrupt.
type InterruptResult struct {
	Interrupted *string `json:"interrupted"`
}

// RespondParams are the params of approval.respond (Choice) and
// clarify.respond (Answer: a string or a list of strings).
type RespondParams struct {
	SessionID           string          `json:"session_id"`
	PromptID            string          `json:"prompt_id"`
	ExecutionGeneration *int64          `json:"execution_generation"`
	Choice              string          `json:"choice,omitempty"`
	Answer              json.RawMessage `json:"answer,omitempty"`
}

// RespondResult is the result of approval.respond and clarify.respond.
type RespondResult struct {
	Status   string `json:"status"` // resolved | already_resolved
	PromptID string `json:"prompt_id"`
}

// Event is the params of a session.event notification (PROTOCOL.md
// section 6). Seq is null for streaming deltas, which are not stored.
type Event struct {
	SessionID           string          `json:"session_id"`
	Seq                 *int64          `json:"seq"`
	Type                string          `json:"type"`
	AdmissionID         string          `json:"admission_id,omitempty"`
	ExecutionGeneration *int64          `json:"execution_generation,omitempty"`
	Payload             json.RawMessage `json:"payload"`
}

// ApprovalsListParams are the params of approvals.list; SessionID is
// optional and adds that session's "session" patterns.
type ApprovalsListParams struct {
	SessionID string `json:"session_id,omitempty"`
}

// AllowRule is one remembered approval pattern.
type AllowRule struct {
	Pattern   string `json:"pattern"`
	CreatedAt string `json:"created_at"`
}

// ApprovalsList is the result of approvals.list: the persisted "always"
// allowlist, and the "session" patterns of the session asked about.
type ApprovalsList struct {
	Always  []AllowRule `json:"always"`
	Session []AllowRule `json:"session,omitempty"`
}

// SessionUpdateParams are the params of session.update: the new Title
// (required, not blank, at most 500 bytes).
type SessionUpdateParams struct {
	SessionID string  `json:"session_id"`
	Title     *string `json:"title"`
}

// SessionDeleteParams are the params of session.delete.
type SessionDeleteParams struct {
	SessionID string `json:"session_id"`
}

// SessionDeleteResult is the result of session.delete: {deleted: true}.
type SessionDeleteResult struct {
	Deleted bool `json:"deleted"`
}

// ApprovalsRevokeParams are the params of approvals.revoke: Pattern as
// approvals.list shows it; with SessionID the session's "session" pattern
// is revoked, without it the "always" one.
type ApprovalsRevokeParams struct {
	Pattern   string `json:"pattern"`
	SessionID string `json:"session_id,omitempty"`
}

// ApprovalsRevokeResult is the result of approvals.revoke: {revoked: true}.
type ApprovalsRevokeResult struct {
	Revoked bool `json:"revoked"`
}

// ---- Pairing and attribution (issue 18) ----

// SenderOwner is Sender.ID for the daemon's own token (daemon.json).
const SenderOwner = "owner"

// Sender says who sent an input or made a decision: ID is "owner" for the
// daemon token or the paired client's client_id ("cli_…"), Label the paired
// client's label (empty for the owner), Client and Version the names the
// connection gave in initialize (empty when it skipped it).
type Sender struct {
	ID      string `json:"id"`
	Label   string `json:"label,omitempty"`
	Client  string `json:"client,omitempty"`
	Version string `json:"version,omitempty"`
}

// PairingCodeParams are the params of auth.pairing_code. TTLSeconds
// defaults to 600 (1..86400); SessionID limits the client to one session;
// ReadOnly allows resume, list and watch only.
type PairingCodeParams struct {
	Label      string `json:"label,omitempty"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
	ReadOnly   bool   `json:"read_only,omitempty"`
}

// PairingCodeResult is the result of auth.pairing_code: the one-time code
// and when it expires (RFC 3339 UTC).
type PairingCodeResult struct {
	Code      string `json:"code"`
	ExpiresAt string `json:"expires_at"`
}

// PairParams are the params of auth.pair (on GET /pair). Label, when set,
// replaces the label given at pairing_code time.
type PairParams struct {
	Code  string `json:"code"`
	Label string `json:"label,omitempty"`
}

// PairResult is the result of auth.pair; Token is shown this once only.
type PairResult struct {
	ClientID string `json:"client_id"`
	Token    string `json:"token"`
	Label    string `json:"label"`
}

// PairedClient is one row of clients.list. SessionID is the session scope
// (empty: every session); times are RFC 3339 UTC, LastUsedAt the last
// accepted upgrade, RevokedAt set once revoked.
type PairedClient struct {
	ClientID   string `json:"client_id"`
	Label      string `json:"label"`
	SessionID  string `json:"session_id,omitempty"`
	ReadOnly   bool   `json:"read_only"`
	CreatedAt  string `json:"created_at"`
	LastUsedAt string `json:"last_used_at,omitempty"`
	RevokedAt  string `json:"revoked_at,omitempty"`
}

// ClientsList is the result of clients.list.
type ClientsList struct {
	Clients []PairedClient `json:"clients"`
}

// ClientRef names a paired client (clients.revoke params).
type ClientRef struct {
	ClientID string `json:"client_id"`
}

// RevokeResult is the result of clients.revoke: Closed counts the open
// connections closed (1008).
type RevokeResult struct {
	ClientID string `json:"client_id"`
	Revoked  bool   `json:"revoked"`
	Closed   int    `json:"closed"`
}
