package main

import (
	"regexp"
	"strings"
	"testing"
)

// Every flag that --help lists appears in its Usage lines.
func TestUsageNamesEveryFlag(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"--help"}, &out); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	help := out.String()
	usage, flags, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		t.Fatalf("no Flags section:\n%s", help)
	}
	usage, _, _ = strings.Cut(usage[strings.Index(usage, "Usage:"):], "\n\n")
	// Flags are listed as the usage line spells them, with two dashes.
	names := regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(flags, -1)
	if len(names) < 5 {
		t.Fatalf("found %d flags in:\n%s", len(names), flags)
	}
	for _, n := range names {
		if !strings.Contains(usage, "--"+n[1]) {
			t.Errorf("the Usage lines do not mention --%s:\n%s", n[1], usage)
		}
	}
}
