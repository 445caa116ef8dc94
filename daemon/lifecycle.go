package daemon

import (
	"context"
	"errors"
	"strings"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// The session lifecycle beyond create: session.update (rename),
// session.delete, and approvals.revoke (docs/protocol.md section 4 and
// Part 2 D).

func (d *Daemon) sessionUpdate(ctx context.Context, c *rpc.Conn, p protocol.SessionUpdateParams) (protocol.SessionSummary, error) {
	if err := required("session_id", p.SessionID); err != nil {
		return protocol.SessionSummary{}, err
	}
	if p.Title == nil || strings.TrimSpace(*p.Title) == "" {
		return protocol.SessionSummary{}, protocol.InvalidParams("title", "required: the new title")
	}
	if len(*p.Title) > 500 {
		return protocol.SessionSummary{}, protocol.InvalidParams("title", "longer than 500 bytes")
	}
	var old string
	err := d.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("session.update")
		s, err := getSession(tx, p.SessionID)
		if err != nil {
			return err
		}
		old = s.Title
		return store.RenameSession(tx, p.SessionID, *p.Title)
	})
	if err != nil {
		return protocol.SessionSummary{}, err
	}
	d.audit().Info("session renamed", append(connAttrs(c), "session_id", p.SessionID, "old_title", old, "title", *p.Title)...)
	return d.sessionSummary(ctx, p.SessionID)
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
