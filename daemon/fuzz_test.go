package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/rpc"
	"github.com/sessiond/sessiond/store"
)

// fuzzMethods is the order of the fuzzed method index (index modulo its
// length): the methods GET /rpc serves, in the order of protocol.Methods,
// so that a new method cannot escape the fuzzer. (The seed corpus in
// testdata names methods by this index.)
var fuzzMethods = func() []string {
	var out []string
	for _, m := range rpcMethods() {
		out = append(out, m.Name)
	}
	return out
}()

// fuzzEnv is one in-process daemon per fuzz worker with a live session, a
// queued admission and an open clarify prompt, and the server side of a
// real WebSocket connection to pass to handlers. Params may name them with
// the placeholders $SID, $AID, $PID (ids) and $CWD (an existing absolute
// directory); they are replaced before the call.
type fuzzEnv struct {
	d            *Daemon
	conn         *rpc.Conn
	replacements [][2][]byte
}

func startFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	var m *fixtures.FakeModel
	d := startTestWith(tb, "agent: {clarify_timeout: 3600}\nlimits: {max_queued_per_session: 50}", func(fm *fixtures.FakeModel) {
		m = fm
		m.On("ask", fixtures.Reply{ToolCalls: []fixtures.FakeToolCall{{Name: "clarify",
			Arguments: `{"question":"which?","choices":["a","b"]}`}}})
	})

	// A real connection, drained by a reader so notifications never pile up.
	ws, _, err := websocket.Dial(context.Background(), d.desc.URL, &websocket.DialOptions{
		HTTPHeader: fixtures.BearerHeader(d.token), Subprotocols: []string{SubprotocolV1}})
	if err != nil {
		tb.Fatal(err)
	}
	ws.SetReadLimit(-1)
	tb.Cleanup(func() { ws.CloseNow() })
	go func() {
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	env := &fuzzEnv{d: d}
	fuzzWait(tb, "the connection is registered", func() bool {
		d.connMu.Lock()
		defer d.connMu.Unlock()
		for c := range d.conns {
			env.conn = c
		}
		return env.conn != nil
	})

	cwd := tb.TempDir()
	var sid string
	err = d.db.InTx(context.Background(), func(tx *store.Tx) (err error) {
		ts := []string{"terminal", "clarify"}
		sid, err = d.createSession(tx, protocol.SessionCreateParams{Cwd: cwd, Model: fixtures.FakeModelName,
			Provider: "openai", BaseURL: m.URL(), Toolsets: &ts})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	submit := func(input, text string) protocol.Receipt {
		res, err := d.promptSubmit(context.Background(), env.conn, protocol.SubmitParams{SessionID: sid, InputID: input, Text: text})
		if err != nil {
			tb.Fatal(err)
		}
		return res
	}
	submit("ask", "ask")
	var promptID string
	fuzzWait(tb, "the clarify prompt opens", func() bool {
		snap, err := d.snapshot(sid, nil)
		if err != nil || len(snap.Prompts) == 0 {
			return false
		}
		promptID = snap.Prompts[0].PromptID
		return true
	})
	queued := submit("queued", "queued behind the prompt")
	env.replacements = [][2][]byte{
		{[]byte("$SID"), []byte(sid)},
		{[]byte("$AID"), []byte(queued.AdmissionID)},
		{[]byte("$PID"), []byte(promptID)},
		{[]byte("$CWD"), []byte(cwd)},
	}
	return env
}

func fuzzWait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	fixtures.Eventually(tb, 20*time.Second, what, cond)
}

// documentedCode is the code each reason of PROTOCOL.md section 3 is sent
// with; internal (-32603) is absent on purpose: no params may cause it.
var documentedCode = map[protocol.Reason]int{
	protocol.ReasonInvalidParams:      protocol.CodeInvalidParams,
	protocol.ReasonNotFound:           protocol.CodeRefused,
	protocol.ReasonStaleGeneration:    protocol.CodeRefused,
	protocol.ReasonUnknownExecution:   protocol.CodeRefused,
	protocol.ReasonAdmissionConflict:  protocol.CodeRefused,
	protocol.ReasonCancelled:          protocol.CodeRefused,
	protocol.ReasonNotQueued:          protocol.CodeRefused,
	protocol.ReasonDraining:           protocol.CodeRefused,
	protocol.ReasonStorageUnavailable: protocol.CodeRefused,
	protocol.ReasonOverloaded:         protocol.CodeRefused,
	protocol.ReasonSessionBusy:        protocol.CodeRefused,
}

// FuzzParams calls every method's real handler (looked up in the daemon's
// dispatch table) with arbitrary params, as the dispatcher would pass them
// (a JSON object, or nothing), against a real in-process daemon and store.
// Properties: no panic; an error is an *protocol.Error (found with errors.As, as
// the dispatcher does) with a reason of PROTOCOL.md section 3 and its code,
// never internal; invalid_params names the field (error.data.field);
// params that break the documented shape of the method (wrong JSON types,
// missing required fields, values out of their documented range) give
// -32602 invalid_params; a result encodes as JSON; nothing hangs (10 s).
func FuzzParams(f *testing.F) {
	seeds := []struct {
		method string
		params string
	}{
		{protocol.MethodInitialize, `{"client":{"name":"fuzz","version":"1"},"protocol":1}`},
		{protocol.MethodSessionCreate, `{"cwd":"$CWD","title":"t","request_id":"r1","toolsets":["terminal"]}`},
		{protocol.MethodSessionResume, `{"session_id":"$SID","after_seq":0}`},
		{protocol.MethodPromptSubmit, `{"session_id":"$SID","input_id":"x","text":"hi","attachments":[{"b":1,"a":"y"}]}`},
		{protocol.MethodClarifyRespond, `{"session_id":"$SID","prompt_id":"$PID","execution_generation":1,"answer":"a"}`},
		// session.update needs at least one of its four settings, not a title.
		{protocol.MethodSessionUpdate, `{"session_id":"$SID","model":"m2","title":null}`},
		{protocol.MethodSessionUpdate, `{"session_id":"$SID","approval_mode":"strict"}`},
		{protocol.MethodSessionUpdate, `{"session_id":"$SID","title":null}`},
	}
	for _, s := range seeds {
		f.Add(uint8(slices.Index(fuzzMethods, s.method)), []byte(s.params))
	}
	env := startFuzzEnv(f)
	mux, err := env.d.routes()
	if err != nil {
		f.Fatal(err)
	}
	handlers := make([]rpc.Handler, len(fuzzMethods))
	for i, name := range fuzzMethods {
		h, ok := mux.Handler(name)
		if !ok {
			f.Fatalf("the daemon does not serve %s", name)
		}
		handlers[i] = h
	}
	f.Fuzz(func(t *testing.T, method uint8, params []byte) {
		i := int(method) % len(fuzzMethods)
		name := fuzzMethods[i]
		for _, r := range env.replacements {
			params = bytes.ReplaceAll(params, r[0], r[1])
		}
		// The dispatcher answers these itself and never calls a handler.
		if !utf8.Valid(params) || !json.Valid(params) {
			return
		}
		trimmed := bytes.Trim(params, " \t\r\n")
		if string(trimmed) == "null" {
			params = nil
		} else if trimmed[0] != '{' {
			return
		}
		violation := paramsViolation(name, params)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := handlers[i](ctx, env.conn, params)
		if err == nil {
			if violation != "" {
				t.Fatalf("%s %.300s: accepted, but %s", name, params, violation)
			}
			if _, err := json.Marshal(res); err != nil {
				t.Fatalf("%s %.300s: result %#v does not encode: %v", name, params, res, err)
			}
			return
		}
		var re *protocol.Error
		if !errors.As(err, &re) {
			t.Fatalf("%s %.300s: error %T %q is not an *protocol.Error (the wire would say -32603 internal)", name, params, err, err)
		}
		code, ok := documentedCode[re.Reason]
		if !ok {
			t.Fatalf("%s %.300s: reason %q (code %d) is not a documented refusal: %v", name, params, re.Reason, re.Code, err)
		}
		if re.Code != code {
			t.Fatalf("%s %.300s: reason %q with code %d, want %d", name, params, re.Reason, re.Code, code)
		}
		if strings.TrimSpace(err.Error()) == "" {
			t.Fatalf("%s %.300s: error without a message", name, params)
		}
		if re.Reason == protocol.ReasonInvalidParams {
			if f, _ := re.Data["field"].(string); f == "" {
				t.Fatalf("%s %.300s: invalid_params without error.data.field: %v", name, params, err)
			}
		}
		if violation != "" && re.Reason != protocol.ReasonInvalidParams {
			t.Fatalf("%s %.300s: %s, but the error is %s: %v", name, params, violation, re.Reason, err)
		}
	})
}

// kind is the JSON shape a param must have.
type kind int

const (
	kString     kind = iota
	kInt             // a JSON integer in int64 range
	kBool            // true or false
	kStringList      // an array of strings
	kObject          // a JSON object
	kAny             // any JSON value
)

// paramSpec is one documented param of a method (PROTOCOL.md section 4 and
// docs/protocol.md part 2, section B).
type paramSpec struct {
	name     string
	kind     kind
	required bool // missing, null or blank is invalid_params
}

var methodParams = map[string][]paramSpec{
	protocol.MethodInitialize: {{"client", kObject, false}, {"protocol", kInt, false}},
	protocol.MethodDaemonInfo: nil,
	protocol.MethodSessionCreate: {{"cwd", kString, false}, {"model", kString, false}, {"provider", kString, false},
		{"base_url", kString, false}, {"toolsets", kStringList, false}, {"title", kString, false},
		{"source", kString, false}, {"request_id", kString, false}},
	protocol.MethodSessionResume: {{"session_id", kString, true}, {"after_seq", kInt, false}},
	protocol.MethodSessionList:   {{"limit", kInt, false}, {"cursor", kString, false}},
	protocol.MethodPromptSubmit: {{"session_id", kString, true}, {"input_id", kString, true}, {"text", kString, true},
		{"attachments", kAny, false}},
	protocol.MethodPromptCancel:    {{"session_id", kString, true}, {"admission_id", kString, true}},
	protocol.MethodInterrupt:       {{"session_id", kString, true}, {"execution_generation", kInt, false}},
	protocol.MethodResolveUnknown:  {{"session_id", kString, true}, {"admission_id", kString, true}, {"execution_generation", kInt, true}},
	protocol.MethodApprovalRespond: {{"session_id", kString, true}, {"prompt_id", kString, true}, {"execution_generation", kInt, true}, {"choice", kString, true}, {"answer", kAny, false}},
	protocol.MethodClarifyRespond:  {{"session_id", kString, true}, {"prompt_id", kString, true}, {"execution_generation", kInt, true}, {"choice", kString, false}, {"answer", kAny, true}},
	protocol.MethodApprovalsList:   {{"session_id", kString, false}},
	protocol.MethodSessionUpdate: {{"session_id", kString, true}, {"title", kString, false}, {"model", kString, false},
		{"approval_mode", kString, false}, {"sandbox", kObject, false}},
	protocol.MethodSessionDelete:   {{"session_id", kString, true}},
	protocol.MethodApprovalsRevoke: {{"pattern", kString, true}, {"session_id", kString, false}},
}

// member finds the member encoding/json would decode into the field name:
// the one whose key equals name under Unicode case folding. sure is false
// when several keys fold to name (which one wins is encoding/json's
// business), so the oracle then says nothing about that field.
func member(obj map[string]json.RawMessage, name string) (v json.RawMessage, present, sure bool) {
	n := 0
	for k, raw := range obj {
		if strings.EqualFold(k, name) {
			v, n = raw, n+1
		}
	}
	return v, n == 1, n <= 1
}

func hasKind(v json.RawMessage, k kind) bool {
	if string(v) == "null" {
		return true // null leaves a field at its zero value
	}
	switch k {
	case kString:
		return v[0] == '"'
	case kInt:
		_, err := strconv.ParseInt(string(v), 10, 64)
		return err == nil
	case kBool:
		return string(v) == "true" || string(v) == "false"
	case kStringList:
		var list []json.RawMessage
		if v[0] != '[' || json.Unmarshal(v, &list) != nil {
			return false
		}
		for _, e := range list {
			if e[0] != '"' && string(e) != "null" {
				return false
			}
		}
		return true
	case kObject:
		return v[0] == '{'
	}
	return true
}

// paramsViolation says how params break the documented shape of method,
// or "" when it sees nothing wrong (which does not mean they are valid).
func paramsViolation(method string, params json.RawMessage) string {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &obj); err != nil {
			return ""
		}
	}
	str := func(name string) (s string, present, sure bool) {
		v, present, sure := member(obj, name)
		if !present || !sure || json.Unmarshal(v, &s) != nil {
			return "", present, sure
		}
		return s, true, true
	}
	for _, p := range methodParams[method] {
		v, present, sure := member(obj, p.name)
		if !sure {
			continue
		}
		if present && !hasKind(v, p.kind) {
			return strconv.Quote(p.name) + " has the wrong JSON type"
		}
		if p.required && (!present || string(v) == "null") {
			return strconv.Quote(p.name) + " is required"
		}
		if p.required && p.kind == kString && p.name != "text" { // text may be blank, not empty
			if s, _, _ := str(p.name); strings.TrimSpace(s) == "" {
				return strconv.Quote(p.name) + " is blank"
			}
		}
	}
	// Types are right from here on; now the documented values.
	if n, ok := intParam(obj, "after_seq"); ok && method == protocol.MethodSessionResume && n < 0 {
		return "after_seq is negative"
	}
	if n, ok := intParam(obj, "limit"); ok && method == protocol.MethodSessionList && n < 0 {
		return "limit is negative"
	}
	switch method {
	case protocol.MethodInitialize:
		if c, present, sure := member(obj, "client"); present && sure && c[0] == '{' {
			var inner map[string]json.RawMessage
			if json.Unmarshal(c, &inner) == nil {
				for _, f := range []string{"name", "version"} {
					if v, present, sure := member(inner, f); present && sure && !hasKind(v, kString) {
						return "client." + f + " has the wrong JSON type"
					}
				}
			}
		}
		if n, ok := intParam(obj, "protocol"); ok && n != protocol.Version {
			return "protocol is not 1"
		}
	case protocol.MethodSessionCreate:
		if s, present, _ := str("cwd"); present && s != "" && !filepath.IsAbs(s) {
			return "cwd is not absolute"
		}
		if s, present, _ := str("provider"); present && s != "" && s != "openai" && s != "custom" {
			return "provider is neither openai nor custom"
		}
		if s, present, _ := str("base_url"); present && s != "" && !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			return "base_url is not http(s)"
		}
		if s, present, _ := str("request_id"); present && s != "" && !admission.ValidInputID(s) {
			return "request_id is not 1-128 characters of [A-Za-z0-9._:-]"
		}
		if s, present, _ := str("title"); present && len(s) > 500 {
			return "title is longer than 500 bytes"
		}
		if v, present, sure := member(obj, "toolsets"); present && sure {
			var list []string
			_ = json.Unmarshal(v, &list)
			for _, t := range list {
				if t != "terminal" && t != "clarify" {
					return "toolsets names an unknown toolset"
				}
			}
		}
	case protocol.MethodPromptSubmit:
		if s, present, sure := str("input_id"); present && sure && !admission.ValidInputID(s) {
			return "input_id is not 1-128 characters of [A-Za-z0-9._:-]"
		}
		if s, present, sure := str("text"); present && sure && s == "" {
			return "text is empty"
		}
		if v, present, sure := member(obj, "attachments"); present && sure && string(v) != "null" && v[0] != '[' {
			return "attachments is not an array"
		}
	case protocol.MethodSessionUpdate:
		given := 0
		for _, f := range []string{"title", "model", "approval_mode", "sandbox"} {
			v, present, sure := member(obj, f)
			if !sure {
				return "" // which duplicate key wins is encoding/json's business
			}
			if present && string(v) != "null" {
				given++
			}
		}
		if given == 0 {
			return "none of title, model, approval_mode and sandbox is given"
		}
		// null leaves a field unset, as if absent.
		if v, _, _ := member(obj, "title"); v != nil && string(v) != "null" {
			if s, _, _ := str("title"); strings.TrimSpace(s) == "" {
				return "title is blank"
			} else if len(s) > 500 {
				return "title is longer than 500 bytes"
			}
		}
		if v, _, _ := member(obj, "approval_mode"); v != nil && string(v) != "null" {
			if s, _, _ := str("approval_mode"); s != "manual" && s != "strict" && s != "off" {
				return "approval_mode is not manual, strict or off"
			}
		}
	case protocol.MethodApprovalRespond:
		if s, present, sure := str("choice"); present && sure && s != "once" && s != "session" && s != "always" && s != "deny" {
			return "choice is not once, session, always or deny"
		}
	case protocol.MethodClarifyRespond:
		if v, present, sure := member(obj, "answer"); present && sure && string(v) != "null" {
			var s string
			var list []string
			if json.Unmarshal(v, &s) != nil && json.Unmarshal(v, &list) != nil {
				return "answer is neither a string nor a list of strings"
			}
		}
	}
	return ""
}

// intParam returns an integer member that encoding/json would decode.
func intParam(obj map[string]json.RawMessage, name string) (int64, bool) {
	v, present, sure := member(obj, name)
	if !present || !sure {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}
