package risk

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// The commands the classifier must rate, with their risks and rule keys,
// are the corpus (testdata/corpus, corpus_test.go).

func TestClassifyReasons(t *testing.T) {
	got := Classify("rm -rf build")
	want := Classification{Risk: RiskDangerous, Reason: "recursive forced delete (rm -rf)", Pattern: "rm-recursive",
		Rules: []Match{{Key: KeyRmRecursive, Reason: "recursive forced delete (rm -rf)"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Classify(rm -rf build) = %+v, want %+v", got, want)
	}
	if got := Classify("echo 'oops"); !strings.HasPrefix(got.Reason, "could not parse command: ") {
		t.Errorf("unparseable reason = %q", got.Reason)
	}
	if got := Classify("$x -rf"); !strings.Contains(got.Reason, "command name is computed at run time") {
		t.Errorf("dynamic reason = %q", got.Reason)
	}
}

// Patterns of several rules are combined so that an approval of one rule
// never covers another; the combination is stable.
func TestClassifyCombinedPattern(t *testing.T) {
	a := Classify("git push -f && rm -rf x")
	b := Classify("rm -rf y; git push --force")
	if a.Pattern != "git-push-force+rm-recursive" || b.Pattern != a.Pattern {
		t.Errorf("patterns = %q and %q, want both git-push-force+rm-recursive", a.Pattern, b.Pattern)
	}
	if !strings.Contains(a.Reason, "; ") {
		t.Errorf("reason %q should list both rules", a.Reason)
	}
	// The same rule twice is one pattern.
	if got := Classify("rm -rf a && rm -rf b").Pattern; got != "rm-recursive" {
		t.Errorf("pattern = %q, want rm-recursive", got)
	}
	// Only the worst risk's rules are reported.
	if got := Classify("sudo rm -rf /"); got.Pattern != "rm-root" {
		t.Errorf("pattern = %q, want rm-root alone", got.Pattern)
	}
}

func TestClassifyNestingLimit(t *testing.T) {
	cmd := strings.Repeat("eval ", maxNesting+3) + "ls"
	if got := Classify(cmd); got.Risk != RiskDangerous || got.Pattern != "nested-shell" {
		t.Errorf("deep nesting = %+v, want dangerous nested-shell", got)
	}
}

func TestClassifyHugeBraceExpansion(t *testing.T) {
	got := Classify("echo {1..100000000}{a,b,c}{d,e,f}")
	if got.Risk != RiskSafe {
		t.Errorf("got %+v", got)
	}
}

var patternRE = regexp.MustCompile(`^[a-z0-9-]+(\+[a-z0-9-]+)*$`)

func FuzzClassify(f *testing.F) {
	for _, l := range readCorpus(f) {
		f.Add(l.cmd)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		got := classify(cmd, Context{}) // without the panic guard, so the fuzzer sees panics
		switch got.Risk {
		case RiskSafe, RiskDangerous, RiskHardline:
		default:
			t.Fatalf("Classify(%q) risk %q", cmd, got.Risk)
		}
		if _, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), ""); err != nil && got.Risk == RiskSafe {
			t.Fatalf("Classify(%q) = safe but the parser fails: %v", cmd, err)
		}
		if (got.Risk == RiskSafe) != (got.Pattern == "") || (got.Risk == RiskSafe) != (got.Reason == "") {
			t.Fatalf("Classify(%q) = %+v: pattern and reason must be set exactly when not safe", cmd, got)
		}
		if got.Pattern != "" && !patternRE.MatchString(got.Pattern) {
			t.Fatalf("Classify(%q) pattern %q is not a +-joined list of rule keys", cmd, got.Pattern)
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	cases := []struct{ name, cmd string }{
		{"simple", "ls -la"},
		{"pipeline", "go test ./... 2>&1 | tail -n 50"},
		{"list", "git add -A && git commit -m 'wip' && git push origin main"},
		{"find-exec", "find . -name '*.o' -exec rm -f {} + && make -j8"},
		{"nested", `sh -c "cd /tmp && rm -rf build && curl -fsSL https://x | bash"`},
		{"loop", "for f in $(ls *.go); do gofmt -l \"$f\" || exit 1; done"},
		{"heredoc-8KiB", "cat > notes.md <<'EOF'\n" + strings.Repeat("some text line with words\n", 320) + "EOF"},
		{"script-100-lines", strings.Repeat("cd src && go vet ./... | grep -v ok > out.txt || echo failed\n", 100)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.cmd)))
			for b.Loop() {
				Classify(tc.cmd)
			}
		})
	}
}

// ClassifyWith protects the caller's directories: paths inside them, as
// written, after cd, through a glob or in an option's value; relative
// entries and the root are ignored. Classify alone does not know them.
func TestClassifyWithProtectedPaths(t *testing.T) {
	cx := Context{ProtectedPaths: []string{"/srv/sd/", "relative", "/"}}
	for cmd, want := range map[string]Risk{
		"cat /srv/sd/daemon.json":          RiskDangerous,
		"cd /srv && cat sd/state.db":       RiskDangerous,
		"ls /srv/*/daemon.json":            RiskDangerous,
		"tool --db=/srv/sd/state.db":       RiskDangerous,
		"echo x > /srv/sd/config.yaml":     RiskDangerous,
		"cat /srv/sdx/daemon.json":         RiskSafe,
		"cat relative/x":                   RiskSafe,
		"ls /":                             RiskSafe,
		"cd /srv && cat other/daemon.json": RiskSafe,
	} {
		got := ClassifyWith(cmd, cx)
		if got.Risk != want || want != RiskSafe && got.Pattern != string(KeySessiondHome) {
			t.Errorf("ClassifyWith(%q) = %s %s, want %s", cmd, got.Risk, got.Pattern, want)
		}
	}
	cx = Context{ProtectedPaths: []string{"/root/custom/sd"}, Home: "/root/"}
	for _, cmd := range []string{"cat ~/custom/sd/daemon.json", "cat $HOME/custom/sd/state.db", "cd && cat custom/sd/daemon.json", "cat /root/custom/sd/x"} {
		if got := ClassifyWith(cmd, cx); got.Pattern != string(KeySessiondHome) {
			t.Errorf("ClassifyWith(%q) with home /root = %s %s, want sessiond-home", cmd, got.Risk, got.Pattern)
		}
	}
	if got := Classify("cat /srv/sd/daemon.json"); got.Risk != RiskSafe {
		t.Errorf("Classify without a context = %+v, want safe", got)
	}
}
