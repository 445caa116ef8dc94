package main

import (
	"strings"

	"github.com/sessiond/sessiond/protocol"
)

// visible returns s with everything a terminal would act on instead of
// print made visible, so that what a person reads is what runs: it is
// protocol.Visible (control characters as control pictures such as "␛" and
// "␍", C1, bidi and zero-width characters as "<U+XXXX>", invalid UTF-8 as
// U+FFFD; newlines and tabs kept). When keepNewlines is false the result is
// one line: newlines and tabs are shown as \n and \t.
func visible(s string, keepNewlines bool) string {
	v := protocol.Visible(s)
	if keepNewlines {
		return v
	}
	return lineEscapes.Replace(v)
}

var lineEscapes = strings.NewReplacer("\n", `\n`, "\t", `\t`)

// visibleLine is visible on one line: newlines shown as \n.
func visibleLine(s string) string { return visible(s, false) }
