package protocol_test

import (
	"encoding/json"
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
