package transcript_test

import (
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/transcript"
)

func TestCloseAnswersOpenCallsThenBoundary(t *testing.T) {
	turn := []transcript.Entry{
		{Role: transcript.RoleUser, Content: "go"},
		{Role: transcript.RoleAssistant, ToolCalls: []transcript.ToolCall{{ID: "c1", Name: "terminal"}, {ID: "c2", Name: "terminal"}, {ID: "c3", Name: "clarify"}}},
		{Role: transcript.RoleTool, ToolCallID: "c1", Content: "ok"},
	}
	e := transcript.Interrupted()
	got := transcript.Close(turn, []string{"c2"}, e)
	want := []transcript.Entry{
		{Role: transcript.RoleTool, ToolCallID: "c2", Content: e.Running, Kind: transcript.KindSynthetic},
		{Role: transcript.RoleTool, ToolCallID: "c3", Content: e.NotRun, Kind: transcript.KindSynthetic},
		{Role: transcript.RoleBoundary, Content: e.Boundary},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Close = %+v\nwant %+v", got, want)
	}
	if got := transcript.Close(nil, nil, transcript.Failed("boom")); len(got) != 1 || got[0].Content != "[turn failed: boom]" {
		t.Fatalf("Close of an empty turn = %+v", got)
	}
}

func TestRepairBoundaryBecomesAssistantAndOpenCallsGetResults(t *testing.T) {
	in := []transcript.Entry{
		{Role: transcript.RoleUser, Content: "u1"},
		{Role: transcript.RoleAssistant, ToolCalls: []transcript.ToolCall{{ID: "c1", Name: "terminal", Arguments: "not json"}}},
		{Role: transcript.RoleBoundary, Content: "[lost]"},
		{Role: "weird", Content: "x"},
	}
	out, notes := transcript.Repair(in)
	want := []transcript.Entry{
		{Role: transcript.RoleUser, Content: "u1"},
		{Role: transcript.RoleAssistant, ToolCalls: []transcript.ToolCall{{ID: "c1", Name: "terminal", Arguments: "{}"}}},
		{Role: transcript.RoleTool, ToolCallID: "c1", Content: transcript.SyntheticInterrupted},
		{Role: transcript.RoleAssistant, Content: "[lost]"},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("Repair = %+v\nwant %+v", out, want)
	}
	if len(notes) != 3 {
		t.Fatalf("notes = %q, want 3 (arguments, missing result, unknown role)", notes)
	}
}
