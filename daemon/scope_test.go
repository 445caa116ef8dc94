package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// The routes bind exactly the rows of protocol.Methods that GET /rpc
// serves, and GET /pair serves initialize and auth.pair: a row without a
// handler, or a handler without a row, is an error of routes (Start
// returns it, the daemon does not start).
func TestRoutesServeTheMethodTable(t *testing.T) {
	d := startTest(t, "")
	m, err := d.routes()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range protocol.Methods {
		if s.Scope != protocol.ScopePairing {
			want = append(want, s.Name)
		}
	}
	slices.Sort(want)
	if got := m.Methods(); !slices.Equal(got, want) {
		t.Fatalf("GET /rpc serves %v, the table %v", got, want)
	}
	if _, err := d.pairRoutes(); err != nil {
		t.Fatal(err)
	}
}

// storeState is every row of the tables a method could change (all but
// boot_epochs, whose lease the heartbeat renews), as text.
func storeState(t *testing.T, d *Daemon) string {
	t.Helper()
	var tables []string
	if err := d.db.Select(context.Background(), &tables, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'boot_epochs' ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err := d.db.ReadTx(context.Background(), func(r *store.Reads) error {
		for _, tb := range tables {
			rows, err := r.Queryx(`SELECT * FROM ` + tb + ` ORDER BY 1`)
			if err != nil {
				return err
			}
			for rows.Next() {
				vals, err := rows.SliceScan()
				if err != nil {
					rows.Close()
					return err
				}
				fmt.Fprintf(&b, "%s %q\n", tb, vals)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// pairedClient pairs a client with the code params and connects it to
// GET /rpc with its token.
func pairedClient(t *testing.T, d *Daemon, code map[string]any) *rpc.Client {
	t.Helper()
	res, err := call(t, d.pairingCode, code)
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, d.pair, map[string]any{"code": res.(protocol.PairingCodeResult).Code})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rpc.Dial(context.Background(), d.desc.URL, rpc.DialOptions{Token: out.(protocol.PairResult).Token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func reasonOf(err error) protocol.Reason {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ""
}

// TestPairedScopesEveryMethod calls every method of protocol.Methods over
// GET /rpc as paired clients of each scope (docs/protocol.md, Part 2, I).
// A read-only client is refused (forbidden) every write and owner method,
// and no call it makes changes the store: a method that writes but is
// marked read in the table fails here. Every paired client is refused the
// owner methods; the owner is refused nothing. A session-scoped client is
// refused session.create and approvals.revoke of an "always" rule, and
// any other session is not_found to it; only the daemon-wide reads below
// ignore the session it names.
func TestPairedScopesEveryMethod(t *testing.T) {
	d := startTest(t, "")
	sid, other := mustSession(t, d), mustSession(t, d)
	ctx := context.Background()
	// Params every method could act on for real: the client's session, a
	// title, a pattern, a cwd...
	params := map[string]any{"session_id": sid, "title": "renamed", "input_id": "scope-1", "text": "x",
		"admission_id": "adm_nope", "prompt_id": "prm_nope", "execution_generation": 1, "choice": "deny",
		"pattern": "rm-recursive", "cwd": t.TempDir(), "client_id": "cli_nope", "label": "x"}
	// The methods a session-scoped client may call whatever session it
	// names: they are not about one session (session.list lists its own).
	daemonWideReads := []string{protocol.MethodInitialize, protocol.MethodDaemonInfo, protocol.MethodSessionList}

	owner, err := rpc.Dial(ctx, d.desc.URL, rpc.DialOptions{Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	readOnly := pairedClient(t, d, map[string]any{"label": "ro", "read_only": true})
	scopedReadOnly := pairedClient(t, d, map[string]any{"label": "sro", "read_only": true, "session_id": sid})
	full := pairedClient(t, d, map[string]any{"label": "full"})
	scoped := pairedClient(t, d, map[string]any{"label": "scoped", "session_id": sid})

	for _, m := range protocol.Methods {
		if m.Scope == protocol.ScopePairing {
			continue // GET /pair only: method not found here
		}
		for name, c := range map[string]*rpc.Client{"read-only": readOnly, "session read-only": scopedReadOnly} {
			before := storeState(t, d)
			_, err := c.CallRaw(ctx, m.Name, params)
			refused := reasonOf(err) == protocol.ReasonForbidden
			if m.Scope != protocol.ScopeRead && !refused {
				t.Errorf("%s client: %s (%s) answered %v, want forbidden", name, m.Name, m.Scope, err)
			}
			if m.Scope == protocol.ScopeRead && refused {
				t.Errorf("%s client: read method %s refused: %v", name, m.Name, err)
			}
			if after := storeState(t, d); after != before {
				t.Errorf("%s client: %s (%s) changed the store: %v", name, m.Name, m.Scope, err)
			}
		}
		// Empty params: the guard decides, the handler then refuses
		// (invalid_params) without acting.
		if _, err := full.CallRaw(ctx, m.Name, map[string]any{"session_id": ""}); (m.Scope == protocol.ScopeOwner) != (reasonOf(err) == protocol.ReasonForbidden) {
			t.Errorf("paired client: %s (%s) answered %v", m.Name, m.Scope, err)
		}
		if _, err := owner.CallRaw(ctx, m.Name, map[string]any{"session_id": ""}); reasonOf(err) == protocol.ReasonForbidden {
			t.Errorf("owner: %s refused: %v", m.Name, err)
		}
		_, err := scoped.CallRaw(ctx, m.Name, map[string]any{"session_id": other, "pattern": "rm-recursive", "title": "stolen"})
		switch r := reasonOf(err); {
		case m.Scope == protocol.ScopeOwner || m.Name == protocol.MethodSessionCreate:
			if r != protocol.ReasonForbidden {
				t.Errorf("session-scoped client: %s answered %v, want forbidden", m.Name, err)
			}
		case slices.Contains(daemonWideReads, m.Name):
			if r == protocol.ReasonForbidden || r == protocol.ReasonNotFound {
				t.Errorf("session-scoped client: %s refused: %v", m.Name, err)
			}
		default:
			if r != protocol.ReasonNotFound {
				t.Errorf("session-scoped client: %s of another session answered %v, want not_found", m.Name, err)
			}
		}
	}
	// Without session_id: approvals.revoke is of an "always" rule
	// (forbidden to a session-scoped client), approvals.list reads them.
	if _, err := scoped.CallRaw(ctx, protocol.MethodApprovalsRevoke, map[string]any{"pattern": "rm-recursive"}); reasonOf(err) != protocol.ReasonForbidden {
		t.Errorf("session-scoped approvals.revoke of an always rule: %v, want forbidden", err)
	}
	if _, err := scoped.CallRaw(ctx, protocol.MethodApprovalsList, map[string]any{}); err != nil {
		t.Errorf("session-scoped approvals.list of the always rules: %v", err)
	}
	var list protocol.SessionList
	if err := scoped.Call(ctx, protocol.MethodSessionList, nil, &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid {
		t.Errorf("session-scoped session.list = %+v, %v; want its session only", list, err)
	}
}
