package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Toolset names, as given in session.create's toolsets; each toolset is
// one tool of the same name.
const (
	ToolsetTerminal = "terminal"
	ToolsetClarify  = "clarify"
)

// Spec is a tool definition for the model: its name, what it does, and a
// JSON Schema (draft 2020-12 subset accepted by OpenAI function calling)
// of its arguments object.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

var terminalSpec = Spec{
	Name: ToolsetTerminal,
	Description: "Run a shell command with /bin/sh -c in the session's working directory and return " +
		"{exit_code, output, truncated, total_bytes, duration_ms, timed_out}. The command is not " +
		"interactive: stdin is closed, editors and pagers are disabled, and anything it leaves " +
		"running in the background is killed when it exits. Output (stdout and stderr together) " +
		"is capped: the head and the tail are kept. Commands are checked before they run: " +
		"destructive ones (recursive or forced rm, force pushes, chmod 777, curl | sh, sudo, …) " +
		"need the user's approval and may be denied; catastrophic ones (rm -rf /, mkfs, " +
		"shutdown, …) are never run. Commands run in a sandbox: by default they may write only in " +
		"the working directory and a private $TMPDIR, and have no network. When the sandbox blocks " +
		"a command the result says sandbox_blocked; ask to run it outside the sandbox with " +
		"sandbox_permissions \"escalated\" and a justification, which a person must approve.",
	Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The shell command line to run."},
    "timeout": {"type": "integer", "minimum": 1, "description": "Time limit in seconds (default 180); the command and its children are killed when it expires."},
    "sandbox_permissions": {"type": "string", "enum": ["escalated"], "description": "Set to \"escalated\" only when the command must run outside the sandbox (write outside the workspace, use the network) and the sandbox blocked it; a person must approve it first."},
    "justification": {"type": "string", "description": "With sandbox_permissions: why the command needs to run outside the sandbox, shown to the person who approves it."}
  },
  "required": ["command"],
  "additionalProperties": false
}`),
}

var clarifySpec = Spec{
	Name: ToolsetClarify,
	Description: "Ask the user a question and wait for the answer, when you cannot proceed without " +
		"their decision. Give either one question (question, optional choices, multi_select) or " +
		"several (questions). With choices the user picks one (or several with multi_select); " +
		"without choices they answer in free text. Returns {responses: [{question, " +
		"choices_offered, answer}], timed_out?}.",
	Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "question": {"type": "string", "description": "The question to ask."},
    "choices": {"type": "array", "items": {"type": "string"}, "maxItems": 26, "description": "Answers to choose from; omit for a free-text answer."},
    "multi_select": {"type": "boolean", "description": "Allow choosing several of the choices."},
    "questions": {
      "type": "array",
      "maxItems": 10,
      "description": "Several questions at once, instead of question/choices/multi_select.",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string", "description": "Optional key for this question."},
          "question": {"type": "string"},
          "choices": {"type": "array", "items": {"type": "string"}, "maxItems": 26},
          "multi_select": {"type": "boolean"}
        },
        "required": ["question"],
        "additionalProperties": false
      }
    }
  },
  "additionalProperties": false
}`),
}

// ValidToolset reports whether name is a known toolset ("terminal" or "clarify").
func ValidToolset(name string) bool {
	return name == ToolsetTerminal || name == ToolsetClarify
}

// ErrUnknownToolset is wrapped by the error Specs returns for an unknown name.
var ErrUnknownToolset = errors.New("unknown toolset")

// Specs returns the tool definitions of the given toolsets, in the order
// given, each once. An empty list gives no tools. An unknown name is an
// error wrapping ErrUnknownToolset. The returned Parameters must not be
// modified.
func Specs(toolsets []string) ([]Spec, error) {
	var out []Spec
	seen := map[string]bool{}
	for _, name := range toolsets {
		if seen[name] {
			continue
		}
		seen[name] = true
		switch name {
		case ToolsetTerminal:
			out = append(out, terminalSpec)
		case ToolsetClarify:
			out = append(out, clarifySpec)
		default:
			return nil, fmt.Errorf("tools: %w %q (known: %s, %s)", ErrUnknownToolset, name, ToolsetTerminal, ToolsetClarify)
		}
	}
	return out, nil
}

// ErrInvalidTerminalArgs is wrapped by every error of ParseTerminalArgs.
var ErrInvalidTerminalArgs = errors.New("invalid terminal arguments")

// MaxTimeoutCeiling is the largest terminal timeout, in seconds, that
// ParseTerminalArgs accepts whatever the configuration (about 68 years):
// any accepted value converts to a time.Duration without overflow. The
// daemon's own limit, terminal.max_timeout, is far lower and is checked by
// the agent.
const MaxTimeoutCeiling = math.MaxInt32

// ParseTerminalArgs decodes and checks the terminal tool's arguments
// against the tool's published schema (see ValidateArgs): a JSON object
// with a non-blank string command and an optional integer timeout in
// seconds, at least 1 and at most MaxTimeoutCeiling. As JSON Schema says,
// 60.0 is the integer 60; 60.5, 0, -5 and 18446744074 are refused, never
// rounded or wrapped. Fields the schema does not list are refused. Errors wrap
// ErrInvalidTerminalArgs and name the offending field.
func ParseTerminalArgs(raw json.RawMessage) (TerminalArgs, error) {
	var a TerminalArgs
	if err := ValidateArgs(terminalSpec.Parameters, raw); err != nil {
		return a, fmt.Errorf("%w: %v", ErrInvalidTerminalArgs, err)
	}
	raw, err := integralTimeout(raw)
	if err != nil {
		return a, fmt.Errorf("%w: %v", ErrInvalidTerminalArgs, err)
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("%w: %v", ErrInvalidTerminalArgs, err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return a, fmt.Errorf("%w: command is empty", ErrInvalidTerminalArgs)
	}
	if err := checkSandboxArgs(a); err != nil {
		return a, err
	}
	return a, nil
}

// integralTimeout rewrites a schema-valid "timeout" written with a
// fraction or an exponent (60.0, 6e1) as the plain integer Go decodes, and
// refuses one above MaxTimeoutCeiling.
func integralTimeout(raw json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return raw, err
	}
	t, ok := obj["timeout"]
	if !ok {
		return raw, nil
	}
	f, _, err := big.ParseFloat(strings.TrimSpace(string(t)), 10, 256, big.ToNearestEven)
	if err != nil {
		return raw, fmt.Errorf("timeout: %v", err)
	}
	n, acc := f.Int64()
	if acc != big.Exact || n > MaxTimeoutCeiling {
		return raw, fmt.Errorf("timeout: %s is greater than the maximum %d seconds", t, MaxTimeoutCeiling)
	}
	obj["timeout"] = json.RawMessage(strconv.FormatInt(n, 10))
	return json.Marshal(obj)
}
