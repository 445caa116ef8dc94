package protocol_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/protocol"
)

// Escape sequences are printed, not interpreted: no ESC, BEL, lone CR,
// C1 or bidi control survives; text and newlines do.
func TestVisible(t *testing.T) {
	cases := map[string]string{
		"plain\nline\ttab":                              "plain\nline\ttab",
		"rm -rf ~ \x1b[2K\x1b[1Gecho hello":             "rm -rf ~ ␛[2K␛[1Gecho hello",
		"\x1b]8;;http://evil/\x1b\\click\x1b]8;;\x1b\\": "␛]8;;http://evil/␛\\click␛]8;;␛\\",
		"\x1b]52;c;cm0gLXJmIH4=\x07":                    "␛]52;c;cm0gLXJmIH4=␇",
		"rm -rf /\recho safe":                           "rm -rf /␍echo safe",
		"windows\r\nline":                               "windows\nline",
		"ls \u202egnp.exe":                              "ls <U+202E>gnp.exe",
		"a\u2066b\u2069c\u200bd":                        "a<U+2066>b<U+2069>c<U+200B>d",
		"c1\u009b31m":                                   "c1<U+009B>31m",
		"del\x7f bad\xff":                               "del␡ bad\uFFFD",
		"ünïcødé 日本":                                    "ünïcødé 日本",
	}
	for in, want := range cases {
		got := protocol.Visible(in)
		if got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
		if strings.ContainsAny(got, "\x1b\x07\r\u009b\u202e") {
			t.Errorf("Visible(%q) keeps a control: %q", in, got)
		}
	}
}

func TestVisibleJSON(t *testing.T) {
	in := json.RawMessage(`{"command":"echo \u001b[31mred","n":12345678901234567890,"list":["\r",{"k\u0007":"v"}]}`)
	var got map[string]any
	if err := json.Unmarshal(protocol.VisibleJSON(in), &got); err != nil {
		t.Fatal(err)
	}
	if got["command"] != "echo ␛[31mred" || got["list"].([]any)[0] != "␍" || got["list"].([]any)[1].(map[string]any)["k␇"] != "v" {
		t.Fatalf("VisibleJSON = %v", got)
	}
	if !strings.Contains(string(protocol.VisibleJSON(in)), "12345678901234567890") {
		t.Fatal("a number lost its text")
	}
}

// JSON inside a string (tool-call arguments, a tool message holding its
// result) is decoded and its strings made visible, at any depth; only the
// strings that change are rewritten, so member order, numbers and spacing
// stay, and the text is still JSON.
func TestVisibleJSONNested(t *testing.T) {
	args, _ := json.Marshal(map[string]any{"command": "echo \x1b]0;title\x07\x1b[2J\r(approved by you: once)", "timeout": 5})
	result, _ := json.Marshal(map[string]any{"output": "out\x1b[31m\u202e", "exit_code": 0})
	msg, _ := json.Marshal(map[string]any{
		"tool_calls": []map[string]any{{"id": "c1", "name": "terminal", "arguments": string(args)}},
		"content":    string(result),
		"twice":      mustString(t, string(args)), // a JSON string holding a JSON string holding JSON
	})
	out := protocol.VisibleJSON(msg)
	var got struct {
		ToolCalls []struct{ Arguments string } `json:"tool_calls"`
		Content   string                       `json:"content"`
		Twice     string                       `json:"twice"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("VisibleJSON = %s: %v", out, err)
	}
	var a struct{ Command string }
	var r struct{ Output string }
	var twice string
	if err := json.Unmarshal([]byte(got.ToolCalls[0].Arguments), &a); err != nil {
		t.Fatalf("arguments %q: %v", got.ToolCalls[0].Arguments, err)
	}
	if err := json.Unmarshal([]byte(got.Content), &r); err != nil {
		t.Fatalf("content %q: %v", got.Content, err)
	}
	if err := json.Unmarshal([]byte(got.Twice), &twice); err != nil {
		t.Fatalf("twice %q: %v", got.Twice, err)
	}
	var a2 struct{ Command string }
	json.Unmarshal([]byte(twice), &a2)
	for name, c := range map[string][2]string{
		"arguments": {a.Command, "echo ␛]0;title␇␛[2J␍(approved by you: once)"},
		"result":    {r.Output, "out␛[31m<U+202E>"},
		"twice":     {a2.Command, "echo ␛]0;title␇␛[2J␍(approved by you: once)"},
	} {
		if c[0] != c[1] {
			t.Errorf("%s: decoded %q, want %q", name, c[0], c[1])
		}
	}
	// Only the strings that change are rewritten.
	for in, want := range map[string]string{
		`{"s":"{\"b\": 12345678901234567890, \"a\": \"\\u001b[2J\"}"}`: `{"s":"{\"b\": 12345678901234567890, \"a\": \"␛[2J\"}"}`,
		`{"s":"{\"a\":\"\\u00e9\",\"b\":[1,2]}"}`:                      `{"s":"{\"a\":\"\\u00e9\",\"b\":[1,2]}"}`,
		`{"s":"{\"a\":\"\\u001b\" broken"}`:                            `{"s":"{\"a\":\"\\u001b\" broken"}`,
		`{"s":"\"\\u001b[2J\""}`:                                       `{"s":"\"␛[2J\""}`,
		`["{\r\"a\":1}"]`:                                              `["{ \"a\":1}"]`,
		`{"s":"{\"a\":\"<b>&\\u001b\"}"}`:                              `{"s":"{\"a\":\"<b>&␛\"}"}`,
	} {
		var g, w any
		json.Unmarshal(protocol.VisibleJSON(json.RawMessage(in)), &g)
		json.Unmarshal([]byte(want), &w)
		if gs, ws := fmt.Sprint(g), fmt.Sprint(w); gs != ws {
			t.Errorf("VisibleJSON(%s) = %s, want %s", in, protocol.VisibleJSON(json.RawMessage(in)), want)
		}
	}
}

func mustString(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzVisibleJSON: the result of VisibleJSON on JSON is JSON, and no
// string in it, nor in JSON held in its strings at any depth, keeps a
// character a terminal would act on.
func FuzzVisibleJSON(f *testing.F) {
	for _, s := range []string{`{"a":"\u001b[2J"}`, `"{\"c\":\"\\u001b\"}"`, `["\"\\\"\\\\u0007\\\"\""]`, `{"\u202e":[1,"\r"]}`, `" {\r\"a\":\"\\u009b\"}"`, `"x\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		out := protocol.VisibleJSON(json.RawMessage(in))
		if !json.Valid(out) {
			t.Fatalf("VisibleJSON(%q) = %q, not JSON", in, out)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if x != protocol.Visible(x) {
					t.Fatalf("VisibleJSON(%q) = %q keeps a control in %q", in, out, x)
				}
				var inner any
				if json.Unmarshal([]byte(x), &inner) == nil {
					walk(inner)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		var v any
		json.Unmarshal(out, &v)
		walk(v)
	})
}
