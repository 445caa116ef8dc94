package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// visible returns s with everything a terminal would act on instead of
// print made visible, so that what a person reads is what runs: control
// characters (C0 but newline, DEL, C1) as \xNN or \t / \r, escape sequences
// therefore as \x1b[..., invisible or reordering format characters
// (zero-width spaces and joiners, bidi overrides and isolates, BOM) as
// \u{NNNN}, and bytes that are not UTF-8 as \xNN. A backslash stays a
// backslash. Newlines are kept when keepNewlines, else shown as \n.
func visible(s string, keepNewlines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewlines:
			b.WriteByte('\n')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u{%04x}`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// visibleLine is visible on one line: newlines shown as \n.
func visibleLine(s string) string { return visible(s, false) }
