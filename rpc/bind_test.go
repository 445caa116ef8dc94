package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
)

func panics(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
			if msg == "" {
				msg = "panic"
			}
		}
	}()
	f()
	return ""
}

// Bind takes only rows of protocol.Methods, with the row's params and
// result types; the typed handler gets decoded, validated params.
func TestBindChecksTheTable(t *testing.T) {
	list := func(ctx context.Context, c *Conn, p protocol.ApprovalsListParams) (protocol.ApprovalsList, error) {
		return protocol.ApprovalsList{Always: []protocol.AllowRule{{Pattern: p.SessionID}}}, nil
	}
	for what, f := range map[string]func(){
		"not in the table": func() { Bind(NewMux(), "approvals.lst", list) },
		"params": func() {
			Bind(NewMux(), protocol.MethodApprovalsList, func(context.Context, *Conn, protocol.SessionRef) (protocol.ApprovalsList, error) {
				return protocol.ApprovalsList{}, nil
			})
		},
		"result": func() {
			Bind(NewMux(), protocol.MethodApprovalsList, func(context.Context, *Conn, protocol.ApprovalsListParams) (protocol.Snapshot, error) {
				return protocol.Snapshot{}, nil
			})
		},
		"twice": func() {
			m := NewMux()
			Bind(m, protocol.MethodApprovalsList, list)
			Bind(m, protocol.MethodApprovalsList, list)
		},
	} {
		if msg := panics(f); msg == "" {
			t.Errorf("%s: Bind did not panic", what)
		}
	}
	m := NewMux()
	Bind(m, protocol.MethodApprovalsList, list)
	h, _ := m.Handler(protocol.MethodApprovalsList)
	res, err := h(context.Background(), nil, json.RawMessage(`{"session_id":"s1"}`))
	if err != nil || res.(protocol.ApprovalsList).Always[0].Pattern != "s1" {
		t.Fatalf("bound handler = %v, %v", res, err)
	}
	_, err = h(context.Background(), nil, json.RawMessage(`{"session_id":5}`))
	if !errors.Is(err, protocol.ErrInvalidParams) {
		t.Fatalf("bad params: %v, want invalid_params", err)
	}
}

// CheckTable names the rows without a bound handler and the registered
// methods that are not rows.
func TestCheckTable(t *testing.T) {
	rows := []protocol.MethodSpec{}
	for _, name := range []string{protocol.MethodApprovalsList, protocol.MethodSessionList} {
		s, _ := protocol.Method(name)
		rows = append(rows, s)
	}
	m := NewMux()
	Bind(m, protocol.MethodApprovalsList, func(context.Context, *Conn, protocol.ApprovalsListParams) (protocol.ApprovalsList, error) {
		return protocol.ApprovalsList{}, nil
	})
	m.Handle("extra", func(context.Context, *Conn, json.RawMessage) (any, error) { return nil, nil })
	err := m.CheckTable(rows)
	if err == nil || !strings.Contains(err.Error(), "no handler bound for [session.list]") || !strings.Contains(err.Error(), "not in the table: [extra]") {
		t.Fatalf("CheckTable = %v", err)
	}
	m = NewMux()
	for _, r := range rows[:1] {
		Bind(m, r.Name, func(context.Context, *Conn, protocol.ApprovalsListParams) (protocol.ApprovalsList, error) {
			return protocol.ApprovalsList{}, nil
		})
	}
	if err := m.CheckTable(rows[:1]); err != nil {
		t.Fatal(err)
	}
}
