package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sessiond/sessiond/daemon"
	"github.com/sessiond/sessiond/tools/risk"
)

const classifyUsage = `sessiond classify — rate shell commands as the terminal tool's approval gate does

Usage:
  sessiond classify [--home DIR] [COMMAND ...]
  sessiond classify --rules-md

Each COMMAND argument is one command; with none, commands are read from
standard input, one per line (a trailing carriage return is dropped, empty
lines are skipped). For each command one JSON object is printed on its own
line:

  {"command": "rm -rf build", "risk": "dangerous",
   "rules": [{"key": "rm-recursive", "reason": "recursive forced delete (rm -rf)"}]}

risk is safe, dangerous (needs an approval in approvals.mode manual) or
hardline (never run); rules lists the rules of that risk that matched, each
with its stable key (docs/risk-rules.md) and a reason, and is empty when the
command is safe. The daemon's home (--home, else $SESSIOND_HOME, else
$XDG_STATE_HOME/sessiond, else ~/.local/state/sessiond) is protected as the
daemon protects it.

--rules-md prints the policy, every rule with its risk and examples, as the
Markdown of docs/risk-rules.md.

Exit codes: 0 every command was rated (whatever its risk); 1 standard input
or output failed; 2 bad flags.

Flags:
  --home DIR
    	the daemon's home, which commands may not touch without approval
    	(default as sessiond resolves it)
  --rules-md
    	print the rules as the Markdown of docs/risk-rules.md and exit
`

// classifyLine is one line of "sessiond classify" output.
type classifyLine struct {
	Command string       `json:"command"`
	Risk    risk.Risk    `json:"risk"`
	Rules   []risk.Match `json:"rules"`
}

// classifyMain runs "sessiond classify" with the arguments after the word
// classify; it returns the exit code.
func classifyMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sessiond classify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "the daemon's home (see classifyUsage)")
	rulesMD := fs.Bool("rules-md", false, "print docs/risk-rules.md (see classifyUsage)")
	fs.Usage = func() { fmt.Fprint(stderr, classifyUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *rulesMD {
		if fs.NArg() > 0 {
			fmt.Fprintln(stderr, "sessiond classify: --rules-md takes no commands")
			return 2
		}
		if _, err := stdout.Write(risk.Markdown()); err != nil {
			fmt.Fprintf(stderr, "sessiond classify: %v\n", err)
			return 1
		}
		return 0
	}
	cx := risk.Context{Home: os.Getenv("HOME")}
	if wd, err := os.Getwd(); err == nil {
		cx.Cwd = wd // relative paths are judged from here, as a session's from its cwd
	}
	if dir, err := daemon.ResolveHome(*home); err == nil {
		cx.ProtectedPaths = []string{dir}
	} else if *home != "" {
		fmt.Fprintf(stderr, "sessiond classify: --home: %v\n", err)
		return 2
	}
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	emit := func(cmd string) error {
		c := risk.ClassifyWith(cmd, cx)
		line := classifyLine{Command: cmd, Risk: c.Risk, Rules: c.Rules}
		if line.Rules == nil {
			line.Rules = []risk.Match{}
		}
		return enc.Encode(line)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sessiond classify: %v\n", err)
		return 1
	}
	if fs.NArg() > 0 {
		for _, cmd := range fs.Args() {
			if err := emit(cmd); err != nil {
				return fail(err)
			}
		}
		if err := out.Flush(); err != nil {
			return fail(err)
		}
		return 0
	}
	in := bufio.NewReader(stdin)
	for {
		line, err := in.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			out.Flush()
			return fail(fmt.Errorf("read standard input: %w", err))
		}
		cmd := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if cmd != "" {
			if err := emit(cmd); err != nil {
				return fail(err)
			}
			// One line in, one line out: a caller may feed commands
			// interactively and wait for each answer.
			if err := out.Flush(); err != nil {
				return fail(err)
			}
		}
		if err != nil {
			return 0
		}
	}
}
