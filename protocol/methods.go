package protocol

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
	NotifySessionEvent    = "session.event"

	// Pairing (PROTOCOL.md section 2, docs/protocol.md "Paired clients").
	MethodPairingCode   = "auth.pairing_code" // owner only
	MethodPair          = "auth.pair"         // GET /pair only
	MethodClientsList   = "clients.list"      // owner only
	MethodClientsRevoke = "clients.revoke"    // owner only
)

// MethodSpec pairs a method with its params and result types; Methods lists
// every method in the order of docs/protocol.md, for the schema and tests.
type MethodSpec struct {
	Name   string
	Params any // a zero value of the params struct
	Result any // a zero value of the result struct
}

// Methods is every request method the daemon serves.
var Methods = []MethodSpec{
	{MethodInitialize, InitializeParams{}, InitializeResult{}},
	{MethodDaemonInfo, DaemonInfoParams{}, DaemonInfo{}},
	{MethodSessionCreate, SessionCreateParams{}, Snapshot{}},
	{MethodSessionResume, ResumeParams{}, Snapshot{}},
	{MethodSessionMessages, MessagesParams{}, MessagesResult{}},
	{MethodSessionList, SessionListParams{}, SessionList{}},
	{MethodPromptSubmit, SubmitParams{}, Receipt{}},
	{MethodPromptCancel, AdmissionRef{}, Receipt{}},
	{MethodInterrupt, InterruptParams{}, InterruptResult{}},
	{MethodResolveUnknown, ResolveUnknownParams{}, Receipt{}},
	{MethodApprovalRespond, RespondParams{}, RespondResult{}},
	{MethodClarifyRespond, RespondParams{}, RespondResult{}},
	{MethodApprovalsList, ApprovalsListParams{}, ApprovalsList{}},
	{MethodSessionUpdate, SessionUpdateParams{}, Snapshot{}},
	{MethodSessionDelete, SessionDeleteParams{}, SessionDeleteResult{}},
	{MethodApprovalsRevoke, ApprovalsRevokeParams{}, ApprovalsRevokeResult{}},
	{MethodPairingCode, PairingCodeParams{}, PairingCodeResult{}},
	{MethodPair, PairParams{}, PairResult{}},
	{MethodClientsList, ClientsListParams{}, ClientsList{}},
	{MethodClientsRevoke, ClientRef{}, RevokeResult{}},
}
