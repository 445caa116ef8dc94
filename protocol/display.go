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
// names included) of the JSON value, and to the strings of JSON held in a
// string: a string whose text is a JSON object, array or string (a tool
// call's arguments, a tool message holding its result) is decoded, made
// visible the same way at any depth and re-encoded, so that a client
// decoding it again (to show a command or its output) gets no escape
// sequence either. Only strings that change are rewritten: member order,
// numbers and spacing stay, and a "\r" between the tokens of JSON held in a
// string becomes a space. A value that is not JSON is returned unchanged.
func VisibleJSON(raw json.RawMessage) json.RawMessage {
	if !json.Valid(raw) {
		return raw
	}
	if out, changed := visibleJSONText(raw); changed {
		return out
	}
	return raw
}

// visibleJSONText rewrites the string literals of the valid JSON text b
// (visibleLiteral) and its "\r" whitespace; changed reports whether
// anything was rewritten. The work is about len(b) per level of JSON held
// in a string, and each level's quotes need a backslash more than the
// level around it, so the levels are at most log2(len(b)).
func visibleJSONText(b []byte) (out []byte, changed bool) {
	out = make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			for b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			lit, ch := visibleLiteral(b[i : j+1])
			out, changed = append(out, lit...), changed || ch
			i = j
		case '\r':
			out, changed = append(out, ' '), true
		default:
			out = append(out, c)
		}
	}
	return out, changed
}

// visibleLiteral returns the JSON string literal lit with its text made
// visible (visibleString), re-encoded only when that changed it.
func visibleLiteral(lit []byte) ([]byte, bool) {
	var s string
	if bytes.IndexByte(lit, '\\') < 0 {
		s = string(lit[1 : len(lit)-1])
	} else if json.Unmarshal(lit, &s) != nil {
		return lit, false
	}
	v := visibleString(s)
	if v == s {
		return lit, false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<U+202E>" stays readable in JSON shown as text
	if enc.Encode(v) != nil {
		return lit, false
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

// visibleString is Visible, except that JSON text (an object, an array or
// a string literal, possibly after whitespace) keeps being JSON: its
// strings are made visible instead (visibleJSONText).
func visibleString(s string) string {
	t := strings.TrimLeft(s, " \t\r\n")
	if t != "" && (t[0] == '{' || t[0] == '[' || t[0] == '"') && json.Valid([]byte(s)) {
		if out, changed := visibleJSONText([]byte(s)); changed {
			return string(out)
		}
		return s
	}
	return Visible(s)
}
