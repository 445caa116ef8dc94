package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/sandbox"
	"github.com/sessiond/sessiond/store"
)

// The session lifecycle beyond create: session.update (rename),
// session.delete, and approvals.revoke (docs/protocol.md section 4 and
// Part 2 D).

func (d *Daemon) sessionUpdate(ctx context.Context, c *rpc.Conn, p protocol.SessionUpdateParams) (protocol.SessionSummary, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.SessionSummary{}, err
	}
	if p.Title == nil && p.Model == nil && p.ApprovalMode == nil && p.Sandbox == nil {
		return protocol.SessionSummary{}, protocol.InvalidParams("title", "required: at least one of title, model, approval_mode and sandbox")
	}
	if p.Title != nil {
		if strings.TrimSpace(*p.Title) == "" {
			return protocol.SessionSummary{}, protocol.InvalidParams("title", "required: the new title")
		}
		if len(*p.Title) > 500 {
			return protocol.SessionSummary{}, protocol.InvalidParams("title", "longer than 500 bytes")
		}
	}
	if p.Model != nil {
		if strings.TrimSpace(*p.Model) == "" || len(*p.Model) > 200 || strings.ContainsFunc(*p.Model, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return protocol.SessionSummary{}, protocol.InvalidParams("model", "must be 1-200 bytes of printable text")
		}
	}
	var old sessionRow
	var settings store.SessionSettings
	err := d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("session.update")
		if err := tx.LockSessions(p.SessionID); err != nil {
			return err
		}
		s, err := getSession(tx, p.SessionID)
		if err != nil {
			return err
		}
		old = s
		if m := p.ApprovalMode; m != nil && identOf(c).SessionID != "" && approvalStrictness(*m) < approvalStrictness(d.approvalMode(s)) {
			// Fewer questions than the owner's mode asks is a widening,
			// like answering "always": beyond a session-scoped client.
			return protocol.Errorf(protocol.ReasonForbidden,
				"a client paired for one session cannot loosen its approvals mode (%s → %s): only the owner can; tighten it or leave it",
				d.approvalMode(s), *m).With("session_id", p.SessionID)
		}
		if p.Title != nil {
			if err := store.RenameSession(tx, p.SessionID, *p.Title); err != nil {
				return err
			}
		}
		settings = store.SessionSettings{Model: p.Model, ApprovalMode: p.ApprovalMode}
		if sp := p.Sandbox; sp != nil {
			// Narrowed from the session's own sandbox, never from the
			// configuration: a session's sandbox only ever shrinks.
			pol, err := d.policy(s).Narrow(sandbox.Mode(sp.Mode), sp.Network, sp.WritableRoots)
			if err != nil {
				field, msg, _ := strings.Cut(err.Error(), ": ")
				return protocol.InvalidParams(field, "%s", msg)
			}
			pol.ReadableRoots = nil // the operator's, read at every command
			b, err := json.Marshal(pol)
			if err != nil {
				return err
			}
			js := string(b)
			settings.Sandbox = &js
		}
		return store.UpdateSessionSettings(tx, p.SessionID, settings)
	})
	if err != nil {
		return protocol.SessionSummary{}, err
	}
	attrs := append(connAttrs(c), "session_id", p.SessionID)
	if p.Title != nil {
		attrs = append(attrs, "old_title", old.Title, "title", *p.Title)
	}
	if p.Model != nil {
		attrs = append(attrs, "old_model", old.Model, "model", *p.Model)
	}
	if p.ApprovalMode != nil {
		attrs = append(attrs, "old_approval_mode", d.approvalMode(old), "approval_mode", *p.ApprovalMode)
	}
	if settings.Sandbox != nil {
		attrs = append(attrs, "old_sandbox", d.policy(old).String(), "sandbox", *settings.Sandbox)
	}
	msg := "session settings changed"
	if p.Model == nil && p.ApprovalMode == nil && p.Sandbox == nil {
		msg = "session renamed"
	}
	d.audit().Info(msg, attrs...)
	return d.sessionSummary(ctx, p.SessionID)
}

// approvalStrictness orders the approvals modes by how much they ask:
// off (nothing) < manual (dangerous commands) < strict (every command).
func approvalStrictness(mode string) int {
	switch mode {
	case "off":
		return 0
	case "manual":
		return 1
	}
	return 2
}

// sessionSummary is the session.list row of one session.
func (d *Daemon) sessionSummary(ctx context.Context, sessionID string) (protocol.SessionSummary, error) {
	r, err := admission.SummaryOf(d.db.Reads(ctx), sessionID)
	if err != nil {
		if _, gerr := getSession(d.db.Reads(ctx), sessionID); gerr != nil {
			return protocol.SessionSummary{}, wireErr(gerr)
		}
		return protocol.SessionSummary{}, wireErr(err)
	}
	return summary(r), nil
}

func (d *Daemon) sessionDelete(ctx context.Context, c *rpc.Conn, p protocol.SessionDeleteParams) (protocol.SessionDeleteResult, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.SessionDeleteResult{}, err
	}
	if err := d.queue.DeleteSession(ctx, p.SessionID); err != nil {
		if errors.Is(err, admission.ErrSessionNotFound) {
			return protocol.SessionDeleteResult{}, protocol.Errorf(protocol.ReasonNotFound, "unknown session %q", p.SessionID).With("session_id", p.SessionID)
		}
		err = wireErr(err)
		var re *protocol.Error
		if errors.As(err, &re) {
			re = re.With("session_id", p.SessionID)
			return protocol.SessionDeleteResult{}, re
		}
		return protocol.SessionDeleteResult{}, err
	}
	// Nothing more will be published for it: subscribers stop waiting.
	d.mcp.drop(p.SessionID)
	d.hub.dropSession(p.SessionID)
	d.audit().Info("session deleted", append(connAttrs(c), "session_id", p.SessionID)...)
	return protocol.SessionDeleteResult{Deleted: true}, nil
}

func (d *Daemon) approvalsRevoke(ctx context.Context, c *rpc.Conn, p protocol.ApprovalsRevokeParams) (protocol.ApprovalsRevokeResult, error) {
	if strings.TrimSpace(p.Pattern) == "" {
		return protocol.ApprovalsRevokeResult{}, protocol.InvalidParams("pattern", "required: a pattern as approvals.list shows it")
	}
	if p.SessionID != "" {
		if _, err := getSession(d.db.Reads(ctx), p.SessionID); err != nil {
			return protocol.ApprovalsRevokeResult{}, err
		}
	}
	if err := d.prompts.Revoke(ctx, p.SessionID, p.Pattern); err != nil {
		return protocol.ApprovalsRevokeResult{}, err
	}
	scope := "always"
	if p.SessionID != "" {
		scope = "session"
	}
	d.audit().Info("approval revoked", append(connAttrs(c), "pattern", p.Pattern, "scope", scope, "session_id", p.SessionID)...)
	return protocol.ApprovalsRevokeResult{Revoked: true}, nil
}

// dropSession forgets every subscription to sessionID (deleted).
func (h *hub) dropSession(sessionID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sessionID)
}
