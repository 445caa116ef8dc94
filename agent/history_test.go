package agent

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/model"
)

func sys(cwd string) model.Message {
	return model.Message{Role: model.RoleSystem, Content: fmt.Sprintf(SystemPrompt, cwd)}
}

func user(s string) model.Message { return model.Message{Role: model.RoleUser, Content: s} }
func asst(s string, calls ...model.ToolCall) model.Message {
	return model.Message{Role: model.RoleAssistant, Content: s, ToolCalls: calls}
}
func toolMsg(id, s string) model.Message {
	return model.Message{Role: model.RoleTool, ToolCallID: id, Content: s}
}
func call(id string) model.ToolCall {
	return model.ToolCall{ID: id, Name: "terminal", Arguments: `{"command":"echo ` + id + `"}`}
}

func TestBuildMessages(t *testing.T) {
	const cwd = "/work/dir"
	tests := []struct {
		name string
		in   []Stored
		want []model.Message
	}{
		{
			name: "empty transcript is the system prompt only",
			in:   nil,
			want: []model.Message{sys(cwd)},
		},
		{
			name: "plain turns",
			in: []Stored{
				{Role: "user", Content: "hi"},
				{Role: "assistant", Content: "hello"},
				{Role: "user", Content: "again"},
				{Role: "assistant", Content: "sure"},
			},
			want: []model.Message{sys(cwd), user("hi"), asst("hello"), user("again"), asst("sure")},
		},
		{
			name: "two calls, one answered: synthetic result before the next user message",
			in: []Stored{
				{Role: "user", Content: "u1"},
				{Role: "assistant", ToolCalls: []model.ToolCall{call("c1"), call("c2")}},
				{Role: "tool", ToolCallID: "c1", Content: "r1"},
				{Role: "user", Content: "u2"},
				{Role: "assistant", Content: "done"},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("", call("c1"), call("c2")),
				toolMsg("c1", "r1"), toolMsg("c2", SyntheticInterrupted), user("u2"), asst("done")},
		},
		{
			name: "second call answered, first not: both present, answered one kept as is",
			in: []Stored{
				{Role: "user", Content: "u1"},
				{Role: "assistant", ToolCalls: []model.ToolCall{call("c1"), call("c2")}},
				{Role: "tool", ToolCallID: "c2", Content: "r2"},
				{Role: "user", Content: "u2"},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("", call("c1"), call("c2")),
				toolMsg("c2", "r2"), toolMsg("c1", SyntheticInterrupted), user("u2")},
		},
		{
			name: "unanswered calls at the end of the transcript",
			in: []Stored{
				{Role: "user", Content: "u1"},
				{Role: "assistant", Content: "let me look", ToolCalls: []model.ToolCall{call("c1")}},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("let me look", call("c1")), toolMsg("c1", SyntheticInterrupted)},
		},
		{
			name: "orphan tool messages dropped",
			in: []Stored{
				{Role: "tool", ToolCallID: "ghost", Content: "before anything"},
				{Role: "user", Content: "u1"},
				{Role: "tool", ToolCallID: "c1", Content: "before its call"},
				{Role: "assistant", ToolCalls: []model.ToolCall{call("c1")}},
				{Role: "tool", ToolCallID: "nope", Content: "answers no call"},
				{Role: "tool", ToolCallID: "c1", Content: "r1"},
				{Role: "assistant", Content: "final"},
				{Role: "tool", ToolCallID: "c1", Content: "late, after the next assistant"},
				{Role: "tool", ToolCallID: "", Content: "no id"},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("", call("c1")), toolMsg("c1", "r1"), asst("final")},
		},
		{
			name: "a result arriving after the next user message is dropped (the synthetic one stays)",
			in: []Stored{
				{Role: "user", Content: "u1"},
				{Role: "assistant", ToolCalls: []model.ToolCall{call("c1")}},
				{Role: "user", Content: "u2"},
				{Role: "tool", ToolCallID: "c1", Content: "too late"},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("", call("c1")), toolMsg("c1", SyntheticInterrupted), user("u2")},
		},
		{
			name: "duplicate tool results dropped",
			in: []Stored{
				{Role: "user", Content: "u1"},
				{Role: "assistant", ToolCalls: []model.ToolCall{call("c1"), call("c2")}},
				{Role: "tool", ToolCallID: "c1", Content: "first"},
				{Role: "tool", ToolCallID: "c1", Content: "second"},
				{Role: "tool", ToolCallID: "c2", Content: "r2"},
				{Role: "tool", ToolCallID: "c2", Content: "r2 again"},
				{Role: "assistant", Content: "ok"},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("", call("c1"), call("c2")),
				toolMsg("c1", "first"), toolMsg("c2", "r2"), asst("ok")},
		},
		{
			name: "boundary rows become assistant notes, after the synthetic results",
			in: []Stored{
				{Role: "user", Content: "u1"},
				{Role: "assistant", Content: "working", ToolCalls: []model.ToolCall{call("c1")}},
				{Role: "boundary", Content: "[turn interrupted before it finished]"},
				{Role: "user", Content: "u2"},
				{Role: "boundary", Content: "[turn failed: model: boom]"},
				{Role: "user", Content: "u3"},
			},
			want: []model.Message{sys(cwd), user("u1"), asst("working", call("c1")), toolMsg("c1", SyntheticInterrupted),
				asst("[turn interrupted before it finished]"), user("u2"), asst("[turn failed: model: boom]"), user("u3")},
		},
		{
			name: "user content unchanged",
			in: []Stored{
				{Role: "user", Content: "  leading and trailing spaces \n\n"},
				{Role: "user", Content: `{"role":"system","content":"not json to parse"}`},
				{Role: "user", Content: "ünïcødé ✓ 日本語 \x00 nul\ttab"},
				{Role: "user", Content: "not run: turn interrupted"},
			},
			want: []model.Message{sys(cwd), user("  leading and trailing spaces \n\n"),
				user(`{"role":"system","content":"not json to parse"}`), user("ünïcødé ✓ 日本語 \x00 nul\ttab"),
				user("not run: turn interrupted")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]Stored(nil), tt.in...)
			got := BuildMessages(cwd, tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("BuildMessages:\n got %s\nwant %s", dump(got), dump(tt.want))
			}
			if !reflect.DeepEqual(in, tt.in) {
				t.Fatalf("BuildMessages modified its input")
			}
			checkPaired(t, got)
		})
	}
}

// checkPaired asserts the Chat Completions invariant: every assistant tool
// call is answered by exactly one tool message before the next non-tool
// message, and every tool message answers a call of the assistant message
// right before its tool block.
func checkPaired(t *testing.T, ms []model.Message) {
	t.Helper()
	for i := 0; i < len(ms); i++ {
		if ms[i].Role == model.RoleTool {
			t.Fatalf("message %d: tool message %q not preceded by its assistant call", i, ms[i].ToolCallID)
		}
		if ms[i].Role != model.RoleAssistant || len(ms[i].ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range ms[i].ToolCalls {
			want[c.ID] = true
		}
		j := i + 1
		for ; j < len(ms) && ms[j].Role == model.RoleTool; j++ {
			if !want[ms[j].ToolCallID] {
				t.Fatalf("message %d: tool result %q answers no open call", j, ms[j].ToolCallID)
			}
			delete(want, ms[j].ToolCallID)
		}
		if len(want) > 0 {
			t.Fatalf("assistant message %d: calls without a result: %v", i, want)
		}
		i = j - 1
	}
}

func dump(ms []model.Message) string {
	s := ""
	for _, m := range ms {
		if m.Role == model.RoleSystem {
			s += "\n  system(...)"
			continue
		}
		s += fmt.Sprintf("\n  %s %q", m.Role, m.Content)
		if m.ToolCallID != "" {
			s += " id=" + m.ToolCallID
		}
		for _, c := range m.ToolCalls {
			s += " call=" + c.ID
		}
	}
	return s
}
