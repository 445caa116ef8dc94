package protocol

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Length limits of string params, in bytes: longer values are
// invalid_params naming the field (they would otherwise be stored as is).
const (
	MaxIDBytes     = 128      // session_id, admission_id, prompt_id, input_id, request_id
	MaxPathBytes   = 4096     // cwd, writable_roots entries
	MaxModelBytes  = 256      // model
	MaxNameBytes   = 64       // provider, mode
	MaxURLBytes    = 2048     // base_url
	MaxTitleBytes  = 1024     // title
	MaxSourceBytes = 256      // source, client name and version
	MaxCursorBytes = 1024     // session.list cursor
	MaxToolsets    = 16       // toolsets entries
	MaxRoots       = 64       // writable_roots entries
	MaxInputText   = 64 << 20 // prompt.submit text: the daemon's limits.max_input_bytes applies first
)

var inputIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidInputID reports whether id is 1-128 characters of [A-Za-z0-9._:-].
func ValidInputID(id string) bool { return inputIDPattern.MatchString(id) }

// Validator is implemented by every params struct; rpc.Decode calls it.
type Validator interface {
	Validate() error
}

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return InvalidParams(field, "required")
	}
	return maxLen(field, v, MaxIDBytes)
}

func maxLen(field, v string, n int) error {
	if len(v) > n {
		return InvalidParams(field, "%d bytes; at most %d", len(v), n)
	}
	if !utf8.ValidString(v) {
		return InvalidParams(field, "not valid UTF-8")
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the client's name and version lengths.
func (p InitializeParams) Validate() error {
	return firstErr(maxLen("client.name", p.Client.Name, MaxSourceBytes),
		maxLen("client.version", p.Client.Version, MaxSourceBytes))
}

// Validate accepts anything: daemon.info has no params.
func (p DaemonInfoParams) Validate() error { return nil }

// Validate checks lengths; the daemon fills in defaults and checks cwd,
// provider, base_url and toolsets against its configuration.
func (p SessionCreateParams) Validate() error {
	err := firstErr(maxLen("cwd", p.Cwd, MaxPathBytes), maxLen("model", p.Model, MaxModelBytes),
		maxLen("provider", p.Provider, MaxNameBytes), maxLen("base_url", p.BaseURL, MaxURLBytes),
		maxLen("title", p.Title, MaxTitleBytes), maxLen("source", p.Source, MaxSourceBytes),
		maxLen("request_id", p.RequestID, MaxIDBytes))
	if err != nil {
		return err
	}
	if p.Toolsets != nil && len(*p.Toolsets) > MaxToolsets {
		return InvalidParams("toolsets", "%d entries; at most %d", len(*p.Toolsets), MaxToolsets)
	}
	if s := p.Sandbox; s != nil {
		if err := maxLen("sandbox.mode", s.Mode, MaxNameBytes); err != nil {
			return err
		}
		if len(s.WritableRoots) > MaxRoots {
			return InvalidParams("sandbox.writable_roots", "%d entries; at most %d", len(s.WritableRoots), MaxRoots)
		}
		for _, r := range s.WritableRoots {
			if err := maxLen("sandbox.writable_roots", r, MaxPathBytes); err != nil {
				return err
			}
		}
	}
	return validateMCPServers(p.MCPServers)
}

// Validate requires session_id; after_seq must be >= 0.
func (p ResumeParams) Validate() error {
	if err := required("session_id", p.SessionID); err != nil {
		return err
	}
	if p.AfterSeq != nil && *p.AfterSeq < 0 {
		return InvalidParams("after_seq", "must be >= 0")
	}
	return nil
}

// Validate requires session_id; before_id must be > 0 and limit >= 0.
func (p MessagesParams) Validate() error {
	if err := required("session_id", p.SessionID); err != nil {
		return err
	}
	if p.BeforeID != nil && *p.BeforeID <= 0 {
		return InvalidParams("before_id", "must be > 0")
	}
	if p.Limit < 0 {
		return InvalidParams("limit", "must be positive")
	}
	return nil
}

// Validate checks limit >= 0 and the cursor's length.
func (p SessionListParams) Validate() error {
	if p.Limit < 0 {
		return InvalidParams("limit", "must be positive")
	}
	return maxLen("cursor", p.Cursor, MaxCursorBytes)
}

// Validate requires session_id, an input_id of 1-128 characters of
// [A-Za-z0-9._:-], a non-empty text, and when_busy (when given) one of
// queue, steer, interrupt, reject.
func (p SubmitParams) Validate() error {
	if err := required("session_id", p.SessionID); err != nil {
		return err
	}
	if !ValidInputID(p.InputID) {
		return InvalidParams("input_id", "must be 1-128 characters of [A-Za-z0-9._:-]")
	}
	if p.Text == "" {
		return InvalidParams("text", "required and non-empty")
	}
	if !utf8.ValidString(p.Text) {
		return InvalidParams("text", "not valid UTF-8")
	}
	switch p.WhenBusy {
	case "", WhenBusyQueue, WhenBusySteer, WhenBusyInterrupt, WhenBusyReject:
	default:
		return InvalidParams("when_busy", "must be queue, steer, interrupt or reject, not %q", p.WhenBusy)
	}
	return nil
}

// Validate requires session_id and admission_id.
func (p AdmissionRef) Validate() error {
	return firstErr(required("session_id", p.SessionID), required("admission_id", p.AdmissionID))
}

// Validate requires session_id, admission_id and a non-empty UTF-8 text.
func (p UpdateParams) Validate() error {
	if err := firstErr(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return err
	}
	if p.Text == "" {
		return InvalidParams("text", "required and non-empty")
	}
	if !utf8.ValidString(p.Text) {
		return InvalidParams("text", "not valid UTF-8")
	}
	return nil
}

// Validate requires session_id and admission_id; before, when given, must
// name another admission.
func (p MoveParams) Validate() error {
	if err := firstErr(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return err
	}
	if p.Before == p.AdmissionID {
		return InvalidParams("before", "must name another admission than admission_id")
	}
	return nil
}

// Validate requires session_id.
func (p ForkParams) Validate() error { return required("session_id", p.SessionID) }

// Validate requires session_id, admission_id and execution_generation.
func (p ResolveUnknownParams) Validate() error {
	if err := firstErr(required("session_id", p.SessionID), required("admission_id", p.AdmissionID)); err != nil {
		return err
	}
	if p.ExecutionGeneration == nil {
		return InvalidParams("execution_generation", "required: the generation of the unknown admission")
	}
	return nil
}

// Validate requires session_id.
func (p InterruptParams) Validate() error { return required("session_id", p.SessionID) }

// Validate requires session_id, prompt_id and execution_generation; the
// daemon checks choice or answer by the method.
func (p RespondParams) Validate() error {
	if err := firstErr(required("session_id", p.SessionID), required("prompt_id", p.PromptID)); err != nil {
		return err
	}
	if p.ExecutionGeneration == nil {
		return InvalidParams("execution_generation", "required: the prompt's execution_generation")
	}
	if p.Choice != "" {
		switch p.Choice {
		case ChoiceOnce, ChoiceSession, ChoiceAlways, ChoiceDeny:
		default:
			return InvalidParams("choice", "must be once, session, always or deny")
		}
	}
	return nil
}

// Validate checks session_id's length.
func (p ApprovalsListParams) Validate() error { return maxLen("session_id", p.SessionID, MaxIDBytes) }

// Validate checks the lengths and the approvals mode; the daemon checks
// the title, the model's text and the sandbox against the session's.
func (p SessionUpdateParams) Validate() error {
	err := maxLen("session_id", p.SessionID, MaxIDBytes)
	if err == nil && p.Model != nil {
		err = maxLen("model", *p.Model, MaxModelBytes)
	}
	if err != nil {
		return err
	}
	if m := p.ApprovalMode; m != nil && *m != "manual" && *m != "strict" && *m != "off" {
		return InvalidParams("approval_mode", "must be manual, strict or off, got %q", *m)
	}
	if s := p.Sandbox; s != nil {
		if err := maxLen("sandbox.mode", s.Mode, MaxNameBytes); err != nil {
			return err
		}
		if len(s.WritableRoots) > MaxRoots {
			return InvalidParams("sandbox.writable_roots", "%d entries; at most %d", len(s.WritableRoots), MaxRoots)
		}
		for _, r := range s.WritableRoots {
			if err := maxLen("sandbox.writable_roots", r, MaxPathBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate checks session_id's length; the daemon requires it.
func (p SessionDeleteParams) Validate() error { return maxLen("session_id", p.SessionID, MaxIDBytes) }

// Validate checks the lengths of session_id and pattern.
func (p ApprovalsRevokeParams) Validate() error {
	return firstErr(maxLen("session_id", p.SessionID, MaxIDBytes), maxLen("pattern", p.Pattern, MaxPathBytes))
}

// Validate checks the lengths of label and session_id and that ttl_seconds
// is not negative; the daemon checks the label's characters and the ttl's
// upper bound.
func (p PairingCodeParams) Validate() error {
	if p.TTLSeconds < 0 {
		return InvalidParams("ttl_seconds", "must be positive")
	}
	return firstErr(maxLen("label", p.Label, MaxTitleBytes), maxLen("session_id", p.SessionID, MaxIDBytes))
}

// Validate requires code and checks the label's length.
func (p PairParams) Validate() error {
	return firstErr(required("code", p.Code), maxLen("label", p.Label, MaxTitleBytes))
}

// Validate accepts anything: clients.list has no params.
func (p ClientsListParams) Validate() error { return nil }

// Validate requires client_id.
func (p ClientRef) Validate() error { return required("client_id", p.ClientID) }
