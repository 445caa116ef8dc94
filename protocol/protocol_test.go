package protocol_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
)

// Each bad params value is invalid_params naming its field.
func TestValidateNamesTheField(t *testing.T) {
	gen := int64(1)
	long := strings.Repeat("m", protocol.MaxModelBytes+1)
	cases := []struct {
		v     protocol.Validator
		field string
	}{
		{protocol.SessionCreateParams{Model: long}, "model"},
		{protocol.SessionCreateParams{Source: strings.Repeat("s", protocol.MaxSourceBytes+1)}, "source"},
		{protocol.SessionCreateParams{BaseURL: "http://" + strings.Repeat("u", protocol.MaxURLBytes)}, "base_url"},
		{protocol.ResumeParams{}, "session_id"},
		{protocol.ResumeParams{SessionID: "s", AfterSeq: new(int64(-1))}, "after_seq"},
		{protocol.MessagesParams{SessionID: "s", Limit: -1}, "limit"},
		{protocol.SubmitParams{SessionID: "s", InputID: "bad id", Text: "x"}, "input_id"},
		{protocol.SubmitParams{SessionID: "s", InputID: "i", Text: ""}, "text"},
		{protocol.AdmissionRef{SessionID: "s"}, "admission_id"},
		{protocol.ResolveUnknownParams{SessionID: "s", AdmissionID: "a"}, "execution_generation"},
		{protocol.RespondParams{SessionID: "s", PromptID: "p", ExecutionGeneration: &gen, Choice: "maybe"}, "choice"},
	}
	for _, c := range cases {
		err := c.v.Validate()
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Reason != protocol.ReasonInvalidParams || pe.Data["field"] != c.field {
			t.Errorf("%T%+v: %v, want invalid_params on %s", c.v, c.v, err, c.field)
		}
	}
	ok := []protocol.Validator{
		protocol.SessionCreateParams{Model: "gpt", Cwd: "/tmp"},
		protocol.SubmitParams{SessionID: "s", InputID: "in-1", Text: "hi"},
		protocol.RespondParams{SessionID: "s", PromptID: "p", ExecutionGeneration: &gen, Choice: protocol.ChoiceOnce},
	}
	for _, v := range ok {
		if err := v.Validate(); err != nil {
			t.Errorf("%+v: %v", v, err)
		}
	}
}

// Errors compare by reason, through wrapping.
func TestErrorIsComparesReasons(t *testing.T) {
	err := fmt.Errorf("cancel: %w", protocol.Refuse(protocol.ReasonNotQueued, "admission is no longer queued"))
	if !errors.Is(err, protocol.ErrNotQueued) || errors.Is(err, protocol.ErrNotFound) {
		t.Fatal("Is does not compare reasons")
	}
	if e := protocol.AsError(err); e.Code != protocol.CodeRefused || e.Reason != protocol.ReasonNotQueued || !strings.HasPrefix(e.Message, "cancel: ") {
		t.Fatalf("AsError = %+v", e)
	}
}
