package protocol

import "encoding/json"

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
	// Models are the model names offered for a session's model (the
	// configured model.default, then model.choices), for pickers such as
	// the ACP bridge's; session.update accepts any other name too.
	Models []string `json:"models"`
	// ApprovalMode is the configured approvals.mode (manual | strict |
	// off), the mode of sessions that did not set their own.
	ApprovalMode string `json:"approval_mode"`
	// Storage is the state of state.db's WAL as of the last periodic
	// checkpoint (docs/protocol.md Part 2, section F).
	Storage StorageInfo `json:"storage"`
	// Sandbox is the configured sandbox of new sessions and whether this
	// kernel can enforce it.
	Sandbox SandboxInfo `json:"sandbox"`
	// Cluster is this daemon's part in the daemons sharing its store
	// (docs/protocol.md section K).
	Cluster *ClusterInfo `json:"cluster,omitempty"`
}

// ClusterInfo describes the daemons sharing one store: this daemon's id is
// its boot_epoch; Label is its cluster.label, LeaseTTL its lease in
// seconds; OwnedSessions counts the sessions it owns (runs the turns of),
// LiveDaemons the daemons whose lease is alive, this one included.
type ClusterInfo struct {
	Label         string `json:"label"`
	LeaseTTL      int    `json:"lease_ttl"`
	OwnedSessions int64  `json:"owned_sessions"`
	LiveDaemons   int64  `json:"live_daemons"`
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
// Driver is the store's engine, "sqlite" or "postgres"; Database is where
// it is: state.db's path, or the PostgreSQL DSN with its password replaced
// by "xxxxx". On PostgreSQL there is no WAL file of the daemon's: WALBytes
// is 0, and the "checkpoint" is a periodic write probe of the database
// (LastCheckpointAt, CheckpointError while it fails).
type StorageInfo struct {
	Driver           string `json:"driver"`
	Database         string `json:"database"`
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
	// MCPServers are the session's own MCP servers, besides config.yaml's
	// (PROTOCOL.md 10.1); frozen with the session.
	MCPServers []MCPServerParams `json:"mcp_servers,omitempty"`
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
	Role        Role            `json:"role"`
	Content     string          `json:"content"`
	AdmissionID string          `json:"admission_id,omitempty"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	Kind        string          `json:"kind,omitempty"`
	CreatedAt   string          `json:"created_at"`
	// Truncated says that Content was cut to MaxSnapshotTextBytes (and
	// ToolCalls left out when they were longer) in this snapshot;
	// session.messages returns the message whole.
	Truncated bool `json:"truncated,omitempty"`
	// Sender says, on user messages, who admitted the input (absent for
	// messages from before pairing).
	Sender *Sender `json:"sender,omitempty"`
}

// Prompt is an open approval or clarify prompt of the live execution.
type Prompt struct {
	PromptID            string          `json:"prompt_id"`
	SessionID           string          `json:"session_id"`
	Kind                PromptKind      `json:"kind"`
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
	AdmissionID         string          `json:"admission_id"`
	SessionID           string          `json:"session_id"`
	InputID             string          `json:"input_id"`
	Seq                 int64           `json:"seq"`
	Status              AdmissionStatus `json:"status"`
	Outcome             *Outcome        `json:"outcome" jsonschema:"nullable"`
	ExecutionGeneration *int64          `json:"execution_generation" jsonschema:"nullable"`
	Reason              WaitReason      `json:"reason,omitempty"`
	Error               string          `json:"error,omitempty"`
	Duplicate           bool            `json:"duplicate"`
	Text                string          `json:"text,omitempty"`
	CreatedAt           string          `json:"created_at,omitempty"`
	// Sender says who submitted it (absent for rows from before pairing);
	// ResolvedBy who resolved it after a crash (prompt.resolve_unknown).
	Sender     *Sender `json:"sender,omitempty"`
	ResolvedBy *Sender `json:"resolved_by,omitempty"`
	// Delivery is how the input meets a running turn (PROTOCOL.md 10.2):
	// "steer" when it was admitted for the running turn, "interrupt" when
	// it interrupted it, "queue" otherwise.
	Delivery Delivery `json:"delivery,omitempty"`
	// SteeredInto is the admission of the turn a steer was taken into (at
	// that turn's next model request); the steer then has that turn's
	// status and generation and settles with it.
	SteeredInto string `json:"steered_into,omitempty"`
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
	// Sandbox is the session's sandbox, frozen at creation (and only
	// ever narrowed by session.update).
	Sandbox SandboxInfo `json:"sandbox"`
	// ApprovalMode is the session's approvals mode (manual | strict |
	// off): the one session.update set, else the configured
	// approvals.mode.
	ApprovalMode string `json:"approval_mode"`
	// MCPServers are the session's MCP servers (config.yaml's and its
	// own, frozen at creation) with their state on this daemon.
	MCPServers          []MCPServerStatus `json:"mcp_servers"`
	ExecutionGeneration int64             `json:"execution_generation"`
	Running             *string           `json:"running" jsonschema:"nullable"`
	Messages            []Message         `json:"messages"`
	Prompts             []Prompt          `json:"prompts"`
	Pending             []Receipt         `json:"pending"`
	LastSeq             int64             `json:"last_seq"`
	Events              []Event           `json:"events,omitempty"`
	SnapshotRequired    bool              `json:"snapshot_required,omitempty"`
	// MessagesTruncated says that Messages holds only the newest messages
	// (at most MaxSnapshotMessages and about MaxSnapshotBytes of them);
	// session.messages with before_id = Messages[0].id pages back.
	MessagesTruncated bool `json:"messages_truncated,omitempty"`
	// PendingTruncated says that Pending holds only the oldest
	// MaxSnapshotPending of the session's unsettled admissions, texts cut
	// to MaxSnapshotTextBytes.
	PendingTruncated bool `json:"pending_truncated,omitempty"`
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
	Running         *string `json:"running" jsonschema:"nullable"`
	PendingCount    int64   `json:"pending_count"`
	UnknownCount    int64   `json:"unknown_count"`
	OpenPromptCount int64   `json:"open_prompt_count"`
}

// SessionList is the result of session.list.
type SessionList struct {
	Sessions   []SessionSummary `json:"sessions"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// SubmitParams are the params of prompt.submit. WhenBusy says what to do
// while the session runs a turn (PROTOCOL.md 10.2): queue (the default),
// steer, interrupt or reject.
type SubmitParams struct {
	SessionID   string          `json:"session_id"`
	InputID     string          `json:"input_id"`
	Text        string          `json:"text"`
	Attachments json.RawMessage `json:"attachments,omitempty"`
	WhenBusy    WhenBusy        `json:"when_busy,omitempty"`
}

// UpdateParams are the params of prompt.update: the new text (and
// attachments; omitted: none) of a queued admission (PROTOCOL.md 10.3).
type UpdateParams struct {
	SessionID   string          `json:"session_id"`
	AdmissionID string          `json:"admission_id"`
	Text        string          `json:"text"`
	Attachments json.RawMessage `json:"attachments,omitempty"`
}

// MoveParams are the params of prompt.move: put the queued admission
// AdmissionID just before the queued admission Before, or at the front of
// the queue when Before is omitted.
type MoveParams struct {
	SessionID   string `json:"session_id"`
	AdmissionID string `json:"admission_id"`
	Before      string `json:"before,omitempty"`
}

// MoveResult is the result of prompt.move: the session's queued
// admissions in the order they will run.
type MoveResult struct {
	Order []string `json:"order"`
}

// ForkParams are the params of session.fork: the new session gets the
// transcript of every turn up to and including ThroughAdmissionID (a
// terminal admission; default: every terminal admission).
type ForkParams struct {
	SessionID          string `json:"session_id"`
	ThroughAdmissionID string `json:"through_admission_id,omitempty"`
}

// ForkResult is the result of session.fork: the new session's id.
type ForkResult struct {
	SessionID string `json:"session_id"`
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
	Interrupted *string `json:"interrupted" jsonschema:"nullable"`
}

// RespondParams are the params of approval.respond (Choice) and
// clarify.respond (Answer: a string or a list of strings).
type RespondParams struct {
	SessionID           string          `json:"session_id"`
	PromptID            string          `json:"prompt_id"`
	ExecutionGeneration *int64          `json:"execution_generation"`
	Choice              Choice          `json:"choice,omitempty"`
	Answer              json.RawMessage `json:"answer,omitempty"`
}

// RespondResult is the result of approval.respond and clarify.respond.
type RespondResult struct {
	Status   RespondStatus `json:"status"`
	PromptID string        `json:"prompt_id"`
}

// Event is the params of a session.event notification (PROTOCOL.md
// section 6). Seq is null for streaming deltas, which are not stored.
type Event struct {
	SessionID           string          `json:"session_id"`
	Seq                 *int64          `json:"seq" jsonschema:"nullable"`
	Type                EventType       `json:"type"`
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

// DaemonInfoParams are the params of daemon.info: none.
type DaemonInfoParams struct{}

// MessagesParams are the params of session.messages: the transcript page
// of up to Limit messages (default 200, at most MaxSnapshotMessages, and
// about MaxSnapshotBytes) with id < BeforeID (all when omitted), newest
// last.
type MessagesParams struct {
	SessionID string `json:"session_id"`
	BeforeID  *int64 `json:"before_id,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// MessagesResult is the result of session.messages: Messages in id order;
// HasMore says that older messages exist (page on with before_id =
// Messages[0].id).
type MessagesResult struct {
	Messages []Message `json:"messages"`
	HasMore  bool      `json:"has_more"`
}

// Snapshot bounds: session.resume and session.create return at most
// MaxSnapshotMessages of the newest messages and stop adding older ones once
// MaxSnapshotBytes of content is reached (always at least one message; a
// message's content longer than MaxSnapshotTextBytes is cut, and
// session.messages returns it whole); at most MaxSnapshotPending pending
// receipts, with texts cut to MaxSnapshotTextBytes.
const (
	MaxSnapshotMessages  = 500
	MaxSnapshotBytes     = 4 << 20
	MaxSnapshotPending   = 1000
	MaxSnapshotTextBytes = 64 << 10
	DefaultMessagesLimit = 200
)

// SessionUpdateParams are the params of session.update: at least one of
// Title (not blank, at most 500 bytes), Model (the model name of the
// session's next turns, 1-200 bytes of printable text), ApprovalMode
// ("manual", "strict" or "off": the session's approvals mode from its next
// turn on, in place of the configured approvals.mode) and Sandbox (the
// session's sandbox narrowed further: a more confined mode, network off,
// writable roots inside its current ones; widening is invalid_params
// naming the field). Every change is durable in the sessions row.
type SessionUpdateParams struct {
	SessionID    string         `json:"session_id"`
	Title        *string        `json:"title,omitempty"`
	Model        *string        `json:"model,omitempty"`
	ApprovalMode *string        `json:"approval_mode,omitempty" jsonschema:"enum=manual,enum=strict,enum=off"`
	Sandbox      *SandboxParams `json:"sandbox,omitempty"`
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

// ClientsListParams are the params of clients.list: none.
type ClientsListParams struct{}

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

// DecodeSender parses a stored sender (JSON of a Sender); nil when raw is
// empty or not a readable sender object, so a damaged row never fails a
// snapshot.
func DecodeSender(raw []byte) *Sender {
	if len(raw) == 0 {
		return nil
	}
	var s Sender
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return &s
}
