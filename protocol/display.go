package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Visible returns s safe to print on a terminal: every control character
// and escape sequence is made visible, never interpreted. Newlines and tabs
// stay; "\r\n" becomes "\n"; a lone "\r" (which would let later text
// overwrite earlier text), the other C0 controls and DEL become their
// Unicode control pictures (ESC is "␛", so "\x1b[2J" prints as "␛[2J" and an
// OSC 8 or OSC 52 sequence prints as text); C1 controls, bidirectional
// overrides and isolates (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
// U+061C) and zero-width characters (U+200B-U+200D, U+2060, U+FEFF) become
// "<U+XXXX>"; invalid UTF-8 becomes U+FFFD. Strings a model or another
// client controls (commands, questions, titles, output, messages) must go
// through it before reaching a terminal.
func Visible(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			// "\r\n" is a newline
		case r < 0x20 && r != '\n' && r != '\t':
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('\u2421')
		case needsEscape(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\n' && r != '\t'
	case r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff:
		return true
	}
	return false
}

// VisibleJSON returns raw with Visible applied to every string (member
// names included) of the JSON value; numbers keep their text. A value that
// is not JSON is returned unchanged.
func VisibleJSON(raw json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(visibleValue(v))
	if err != nil {
		return raw
	}
	return out
}

func visibleValue(v any) any {
	switch x := v.(type) {
	case string:
		return Visible(x)
	case []any:
		for i := range x {
			x[i] = visibleValue(x[i])
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[Visible(k)] = visibleValue(e)
		}
		return m
	}
	return v
}
