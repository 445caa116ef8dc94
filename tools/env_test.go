package tools

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestCommandEnvWithholdsSecrets(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "HOME=/root", "OPENAI_API_KEY=sk-1", "GITHUB_TOKEN=gh", "aws_secret_access_key=x",
		"DB_PASSWORD=p", "GOOGLE_APPLICATION_CREDENTIALS=/c.json", "KEYBOARD=us", "EMPTY=", "NOEQUALS"}
	got := commandEnv(environ, DefaultEnvExclude)
	want := append([]string{"PATH=/usr/bin", "HOME=/root", "EMPTY=", "NOEQUALS"}, nonInteractiveEnv...)
	// KEYBOARD matches *KEY*: the default errs on the side of withholding.
	if !slices.Equal(got, want) {
		t.Fatalf("default exclude:\n got %q\nwant %q", got, want)
	}
	if got := commandEnv(environ, nil); len(got) != len(environ)+len(nonInteractiveEnv) {
		t.Fatalf("no exclude passes everything: %q", got)
	}
	if got := commandEnv(environ, []string{"openai_*", "[bad"}); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "OPENAI_") }) ||
		!slices.Contains(got, "GITHUB_TOKEN=gh") {
		t.Fatalf("custom exclude: %q", got)
	}
}

// TestRunTerminalEnvExclude: the command really runs without the withheld
// variables.
func TestRunTerminalEnvExclude(t *testing.T) {
	t.Setenv("SESSIOND_TEST_API_KEY", "sk-very-secret")
	t.Setenv("SESSIOND_TEST_VISIBLE", "shown")
	res, err := RunTerminal(context.Background(), "env", TerminalOptions{EnvExclude: DefaultEnvExclude})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("env: %+v %v", res, err)
	}
	if strings.Contains(res.Output, "sk-very-secret") || !strings.Contains(res.Output, "SESSIOND_TEST_VISIBLE=shown") {
		t.Fatalf("env output:\n%s", res.Output)
	}
}
