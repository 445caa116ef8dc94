package main

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// classify's --help lists every flag it has.
func TestClassifyUsageNamesEveryFlag(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"classify", "--help"}, &out); code != 0 {
		t.Fatalf("classify --help exited %d", code)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	fs.String("home", "", "")
	fs.Bool("rules-md", false, "")
	fs.VisitAll(func(f *flag.Flag) {
		if !regexp.MustCompile(`(?m)^  --` + f.Name + `\b`).MatchString(out.String()) {
			t.Errorf("classify --help does not list --%s:\n%s", f.Name, out.String())
		}
	})
}

// Commands as arguments, each one JSON line; bad flag combinations are
// a clear error with exit code 2.
func TestClassifyMain(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := classifyMain([]string{"--home", t.TempDir(), "ls", "kill $PPID"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := `{"command":"ls","risk":"safe","rules":[]}` + "\n" +
		`{"command":"kill $PPID","risk":"dangerous","rules":[{"key":"kill-other","reason":"signals a process named at run time, which it may not have started (kill $PPID)"}]}` + "\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	errOut.Reset()
	if code := classifyMain([]string{"--rules-md", "ls"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--rules-md takes no commands") {
		t.Errorf("--rules-md with a command: exit %d, stderr %q", code, errOut.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A failing output is reported with exit code 1, nothing silently lost.
func TestClassifyMainWriteError(t *testing.T) {
	var errOut bytes.Buffer
	if code := classifyMain(nil, strings.NewReader("ls\n"), failingWriter{}, &errOut); code != 1 || !strings.Contains(errOut.String(), "disk full") {
		t.Errorf("exit %d, stderr %q; want 1 naming the error", code, errOut.String())
	}
}
