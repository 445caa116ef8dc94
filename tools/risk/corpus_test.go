package risk

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The corpus, testdata/corpus/FAMILY.txt, holds one command a line:
//
//	RISK KEY COMMAND
//
// RISK is safe, dangerous or hardline; KEY is the rule key that must be
// part of the pattern, or "-" for safe lines; COMMAND is the rest of the
// line, or a Go-quoted string when it starts with a double quote (for
// newlines and surrounding blanks). Blank lines and lines starting with #
// are skipped.

type corpusLine struct {
	file string
	line int
	risk Risk
	key  Key
	cmd  string
}

func readCorpus(t testing.TB) []corpusLine {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var out []corpusLine
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			text := sc.Text()
			if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
				continue
			}
			l, err := parseCorpusLine(text)
			if err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			l.file, l.line = filepath.Base(f), n
			out = append(out, l)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return out
}

func parseCorpusLine(text string) (corpusLine, error) {
	var l corpusLine
	f := strings.Fields(text)
	if len(f) < 2 {
		return l, fmt.Errorf("want RISK KEY COMMAND, got %q", text)
	}
	l.risk, l.key = Risk(f[0]), Key(f[1])
	rest := strings.TrimLeft(text, " \t")
	for range 2 {
		rest = strings.TrimLeft(rest[strings.IndexAny(rest, " \t"):], " \t")
	}
	l.cmd = rest
	if strings.HasPrefix(rest, `"`) {
		s, err := strconv.Unquote(rest)
		if err != nil {
			return l, fmt.Errorf("bad quoted command %s: %v", rest, err)
		}
		l.cmd = s
	}
	switch {
	case l.risk == RiskSafe && l.key != "-":
		return l, fmt.Errorf("a safe line names key %q; want -", l.key)
	case l.risk != RiskSafe && l.risk != RiskDangerous && l.risk != RiskHardline:
		return l, fmt.Errorf("unknown risk %q", l.risk)
	case l.risk != RiskSafe:
		if _, ok := Lookup(l.key); !ok {
			return l, fmt.Errorf("unknown rule key %q", l.key)
		}
	}
	return l, nil
}

// maxFalsePositives is the number of everyday commands of the corpus the
// classifier rates dangerous today; it may only go down.
const maxFalsePositives = 0

// The corpus of destructive and everyday commands: no destructive command
// may be rated safe (false negative), each gets its risk and rule key, and
// the everyday commands rated dangerous (false positives) are counted.
func TestCorpus(t *testing.T) {
	lines := readCorpus(t)
	var fn, fp, wrong, bad, good int
	keys := map[Key]int{}
	families := map[string]bool{}
	for _, l := range lines {
		families[strings.TrimSuffix(l.file, ".txt")] = true
		got := Classify(l.cmd)
		where := fmt.Sprintf("%s:%d %q", l.file, l.line, l.cmd)
		if l.risk == RiskSafe {
			good++
			if got.Risk != RiskSafe {
				fp++
				t.Errorf("false positive %s: %s %s (%s)", where, got.Risk, got.Pattern, got.Reason)
			}
			continue
		}
		bad++
		keys[l.key]++
		switch {
		case got.Risk == RiskSafe || got.Risk.rank() < l.risk.rank():
			fn++
			t.Errorf("false negative %s: %s %s, want %s %s", where, got.Risk, got.Pattern, l.risk, l.key)
		case got.Risk != l.risk || !slices.Contains(strings.Split(got.Pattern, "+"), string(l.key)):
			wrong++
			t.Errorf("wrong rule %s: %s %s (%s), want %s %s", where, got.Risk, got.Pattern, got.Reason, l.risk, l.key)
		}
	}
	t.Logf("corpus: %d destructive and %d everyday commands; %d false negatives, %d false positives, %d wrong rule or risk",
		bad, good, fn, fp, wrong)
	if fp > maxFalsePositives {
		t.Errorf("%d false positives, more than the %d allowed", fp, maxFalsePositives)
	}
	if bad < 300 || good < 300 {
		t.Errorf("the corpus has %d destructive and %d everyday commands; want at least 300 of each", bad, good)
	}
	for _, f := range []string{"rm", "git", "sedawk", "archive", "interp", "database", "infra", "network", "process", "system", "perms", "files", "daemon", "everyday"} {
		if !families[f] {
			t.Errorf("no corpus file for family %s", f)
		}
	}
	for _, r := range Rules() {
		if keys[r.Key] == 0 && r.Key != KeyTooComplex && r.Key != KeyInternalError {
			t.Errorf("no destructive line of the corpus expects rule %s", r.Key)
		}
	}
}

func TestParseCorpusLine(t *testing.T) {
	l, err := parseCorpusLine(`dangerous rm-recursive   "rm -rf a\nb"`)
	if err != nil || l.risk != RiskDangerous || l.key != KeyRmRecursive || l.cmd != "rm -rf a\nb" {
		t.Errorf("got %+v, %v", l, err)
	}
	l, err = parseCorpusLine("safe - ls   -la  ")
	if err != nil || l.cmd != "ls   -la  " {
		t.Errorf("got %+v, %v", l, err)
	}
	for _, bad := range []string{"safe", "safe rm-recursive ls", "risky - ls", "dangerous no-such-key ls", `safe - "unterminated`} {
		if _, err := parseCorpusLine(bad); err == nil {
			t.Errorf("parseCorpusLine(%q) succeeded", bad)
		}
	}
}
