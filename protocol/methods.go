package protocol

import (
	"reflect"
	"slices"
	"strings"
)

// Version is the protocol number of PROTOCOL.md (v1).
const Version = 1

// Subprotocol is the WebSocket subprotocol of v1; browsers, which cannot set
// an Authorization header, send the token as a second subprotocol
// TokenSubprotocolPrefix + token.
const (
	Subprotocol            = "sessiond.v1"
	TokenSubprotocolPrefix = "sessiond.token."
)

// Method names (PROTOCOL.md section 4) and the one notification (section 6).
const (
	MethodInitialize      = "initialize"
	MethodDaemonInfo      = "daemon.info"
	MethodSessionCreate   = "session.create"
	MethodSessionResume   = "session.resume"
	MethodSessionMessages = "session.messages"
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
	MethodPromptUpdate    = "prompt.update"
	MethodPromptMove      = "prompt.move"
	MethodSessionFork     = "session.fork"
	NotifySessionEvent    = "session.event"

	// Pairing (PROTOCOL.md section 2, docs/protocol.md "Paired clients").
	MethodPairingCode   = "auth.pairing_code" // owner only
	MethodPair          = "auth.pair"         // GET /pair only
	MethodClientsList   = "clients.list"      // owner only
	MethodClientsRevoke = "clients.revoke"    // owner only
)

// Scope is who may call a method (docs/protocol.md, Part 2, I). Every
// method has exactly one; there is no default: the zero Scope is not
// valid, and TestMethodTable fails for a method without one.
type Scope string

const (
	// ScopeRead methods change nothing: every client with a token may
	// call them, read-only paired clients included.
	ScopeRead Scope = "read"
	// ScopeWrite methods change state (sessions, admissions, prompts,
	// rules): refused with forbidden to read-only paired clients.
	ScopeWrite Scope = "write"
	// ScopeOwner methods need the daemon's own token: refused with
	// forbidden to every paired client.
	ScopeOwner Scope = "owner"
	// ScopePairing methods are served on GET /pair only, which needs no
	// token (auth.pair); GET /rpc does not serve them.
	ScopePairing Scope = "pairing"
)

// Valid reports whether s is one of the four scopes.
func (s Scope) Valid() bool {
	switch s {
	case ScopeRead, ScopeWrite, ScopeOwner, ScopePairing:
		return true
	}
	return false
}

// MethodSpec is one row of the method table: the method's name, who may
// call it, and zero values of its params and result structs. Dispatch (the
// daemon binds one typed handler per row, rpc.Bind checks its types), the
// paired clients' scope guard, `sessiond schema` (and the TypeScript types
// generated from it), the params fuzzer and the method table of
// docs/protocol.md are all derived from Methods.
//
// A session-scoped paired client's reach follows from the params struct:
// a method whose params have a required `session_id` acts on that session;
// an optional one (`omitempty`) on that session, or daemon-wide when it is
// absent; none, daemon-wide (SessionReach).
type MethodSpec struct {
	Name   string
	Scope  Scope
	Params any // a zero value of the params struct
	Result any // a zero value of the result struct
}

// Methods is every request method the daemon serves, in the order of
// docs/protocol.md. Add new rows at the end: the params fuzzer's seed
// corpus (daemon/testdata/fuzz/FuzzParams) names methods by their index
// here. The server's only notification is NotifySessionEvent, whose params
// are described by Events.
var Methods = []MethodSpec{
	{MethodInitialize, ScopeRead, InitializeParams{}, InitializeResult{}},
	{MethodDaemonInfo, ScopeRead, DaemonInfoParams{}, DaemonInfo{}},
	{MethodSessionCreate, ScopeWrite, SessionCreateParams{}, Snapshot{}},
	{MethodSessionResume, ScopeRead, ResumeParams{}, Snapshot{}},
	{MethodSessionMessages, ScopeRead, MessagesParams{}, MessagesResult{}},
	{MethodSessionList, ScopeRead, SessionListParams{}, SessionList{}},
	{MethodPromptSubmit, ScopeWrite, SubmitParams{}, Receipt{}},
	{MethodPromptCancel, ScopeWrite, AdmissionRef{}, Receipt{}},
	{MethodInterrupt, ScopeWrite, InterruptParams{}, InterruptResult{}},
	{MethodResolveUnknown, ScopeWrite, ResolveUnknownParams{}, Receipt{}},
	{MethodApprovalRespond, ScopeWrite, RespondParams{}, RespondResult{}},
	{MethodClarifyRespond, ScopeWrite, RespondParams{}, RespondResult{}},
	{MethodApprovalsList, ScopeRead, ApprovalsListParams{}, ApprovalsList{}},
	{MethodSessionUpdate, ScopeWrite, SessionUpdateParams{}, SessionSummary{}},
	{MethodSessionDelete, ScopeWrite, SessionDeleteParams{}, SessionDeleteResult{}},
	{MethodApprovalsRevoke, ScopeWrite, ApprovalsRevokeParams{}, ApprovalsRevokeResult{}},
	{MethodPairingCode, ScopeOwner, PairingCodeParams{}, PairingCodeResult{}},
	{MethodPair, ScopePairing, PairParams{}, PairResult{}},
	{MethodClientsList, ScopeOwner, ClientsListParams{}, ClientsList{}},
	{MethodClientsRevoke, ScopeOwner, ClientRef{}, RevokeResult{}},
	{MethodPromptUpdate, ScopeWrite, UpdateParams{}, Receipt{}},
	{MethodPromptMove, ScopeWrite, MoveParams{}, MoveResult{}},
	{MethodSessionFork, ScopeWrite, ForkParams{}, ForkResult{}},
}

// Method returns the row of the method called name.
func Method(name string) (MethodSpec, bool) {
	for _, m := range Methods {
		if m.Name == name {
			return m, true
		}
	}
	return MethodSpec{}, false
}

// Reach is what a call of a method may touch, as a session-scoped paired
// client's guard sees it.
type Reach int

const (
	// ReachDaemon: the params have no session_id; the call is daemon-wide.
	ReachDaemon Reach = iota + 1
	// ReachSession: the params require session_id; the call acts on that
	// session only.
	ReachSession
	// ReachSessionOrDaemon: session_id is optional (omitempty); with it
	// the call acts on that session, without it daemon-wide.
	ReachSessionOrDaemon
)

// SessionReach is m's Reach, read from the `session_id` member of its
// params struct (the same tags the schema's "required" list comes from).
func (m MethodSpec) SessionReach() Reach {
	t := reflect.TypeOf(m.Params)
	if t == nil || t.Kind() != reflect.Struct {
		return ReachDaemon
	}
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "session_id" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "omitempty") {
			return ReachSessionOrDaemon
		}
		return ReachSession
	}
	return ReachDaemon
}
