package rpc

import (
	"encoding/json"
	"errors"
	"github.com/sessiond/sessiond/protocol"
	"testing"
)

func TestDecodeParams(t *testing.T) {
	var p protocol.SubmitParams
	if err := Decode(json.RawMessage(`{"session_id":"s","input_id":"i","text":"t","from_the_future":1}`), &p); err != nil ||
		p.SessionID != "s" || p.InputID != "i" || p.Text != "t" {
		t.Fatalf("valid params with an unknown member: %+v %v", p, err)
	}
	if err := Decode(nil, &p); err != nil {
		t.Fatalf("missing params: %v", err)
	}
	cases := map[string]string{ // params → the field the error must name
		`{"session_id":1}`:                "session_id",
		`{"Session_ID":"s","text":"t"}`:   "Session_ID",
		`{"session_id":"s","TEXT":"t"}`:   "TEXT",
		`{"session_id":"s","Input_Id":1}`: "Input_Id",
	}
	for params, field := range cases {
		var p protocol.SubmitParams
		err := Decode(json.RawMessage(params), &p)
		var e *protocol.Error
		if !errors.As(err, &e) || e.Reason != protocol.ReasonInvalidParams || e.Data["field"] != field {
			t.Errorf("Decode(%s) = %v, want invalid_params naming %q", params, err, field)
		}
	}
	var e *protocol.Error
	if err := Decode(json.RawMessage(`[1]`), &p); !errors.As(err, &e) || e.Reason != protocol.ReasonInvalidParams {
		t.Errorf("an array: %v", err)
	}
}
