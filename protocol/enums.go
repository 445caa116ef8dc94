package protocol

// AdmissionStatus is a receipt's status (PROTOCOL.md section 5).
type AdmissionStatus string

// The admission statuses.
const (
	StatusQueued   AdmissionStatus = "queued"   // committed and waiting its turn
	StatusStarted  AdmissionStatus = "started"  // its turn runs in this daemon
	StatusUnknown  AdmissionStatus = "unknown"  // it was started when a daemon died; holds the FIFO
	StatusTerminal AdmissionStatus = "terminal" // settled with an outcome
)

// Outcome is how a terminal admission ended.
type Outcome string

// The outcomes.
const (
	OutcomeCompleted   Outcome = "completed"   // the turn ran to its final answer
	OutcomeInterrupted Outcome = "interrupted" // session.interrupt, graceful stop, or resolve_unknown
	OutcomeFailed      Outcome = "failed"      // the model or the turn failed; see error
	OutcomeCancelled   Outcome = "cancelled"   // prompt.cancel while queued
)

// WaitReason says why a queued receipt waits.
type WaitReason string

// The wait reasons.
const (
	WaitBusy     WaitReason = "busy"     // its session runs a turn, or earlier inputs wait
	WaitCapacity WaitReason = "capacity" // the daemon-wide limit of concurrent turns is reached
	WaitUnknown  WaitReason = "unknown"  // an unknown admission holds the session's FIFO
)

// WhenBusy is what prompt.submit asks for when its session runs a turn
// (PROTOCOL.md section 10.2).
type WhenBusy string

// The when_busy values.
const (
	WhenBusyQueue     WhenBusy = "queue"     // wait in the FIFO (the default)
	WhenBusySteer     WhenBusy = "steer"     // hand it to the running turn at its next model request
	WhenBusyInterrupt WhenBusy = "interrupt" // interrupt the running turn and run this next
	WhenBusyReject    WhenBusy = "reject"    // refuse with session_busy; store nothing
)

// Delivery is how an admitted input meets a running turn (a receipt's
// delivery): queue, steer or interrupt. A steer or interrupt asked while
// the session is idle is admitted as queue.
type Delivery string

// The deliveries.
const (
	DeliveryQueue     Delivery = "queue"
	DeliverySteer     Delivery = "steer"
	DeliveryInterrupt Delivery = "interrupt"
)

// PromptKind is approval or clarify.
type PromptKind string

// The prompt kinds.
const (
	KindApproval PromptKind = "approval"
	KindClarify  PromptKind = "clarify"
)

// Resolution is how a prompt closed (prompt.closed).
type Resolution string

// The resolutions.
const (
	ResolutionAnswered    Resolution = "answered"
	ResolutionTimedOut    Resolution = "timed_out"
	ResolutionInterrupted Resolution = "interrupted"
	ResolutionFenced      Resolution = "fenced"
)

// Choice is an approval answer.
type Choice string

// The approval choices.
const (
	ChoiceOnce    Choice = "once"
	ChoiceSession Choice = "session"
	ChoiceAlways  Choice = "always"
	ChoiceDeny    Choice = "deny"
)

// Choices is every approval choice, in the order approval cards show them.
var Choices = []Choice{ChoiceOnce, ChoiceSession, ChoiceAlways, ChoiceDeny}

// RespondStatus is the status of approval.respond and clarify.respond.
type RespondStatus string

// The respond statuses.
const (
	Resolved        RespondStatus = "resolved"
	AlreadyResolved RespondStatus = "already_resolved"
)

// Role is a transcript message's role; a boundary closes a turn lost in a
// crash and is never sent to the model.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	RoleBoundary  Role = "boundary"
)

// Risk is a command's rating by the approval gate.
type Risk string

// The risks.
const (
	RiskSafe      Risk = "safe"
	RiskDangerous Risk = "dangerous"
	RiskHardline  Risk = "hardline"
)
