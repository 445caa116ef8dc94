package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ValidateArgs checks a tool call's arguments (raw JSON text) against the
// tool's published parameters schema (a JSON Schema, draft 2020-12), with
// github.com/santhosh-tekuri/jsonschema/v6.
//
// It follows JSON Schema, not Go: an "integer" is any number with no
// fractional part, so 60, 60.0 and 6e1 are integers and 60.5 is not;
// properties the schema does not list are refused where it says
// "additionalProperties": false, as the terminal and clarify schemas do.
// The error lists each violation as "LOCATION: WHAT", e.g. "timeout:
// minimum: got 0, want 1" or "questions[0]: missing property 'question'",
// in words a model can act on. A schema that does not compile is an error
// naming it (a bug of ours, never the model's).
// A $ref or $schema naming anything outside the schema (a file, a URL;
// the standard metaschemas aside) is refused, never loaded: an MCP
// server's schema must not have the daemon read or fetch anything.
func ValidateArgs(schema, args json.RawMessage) error {
	sch, err := compiledSchema(schema)
	if err != nil {
		return fmt.Errorf("tool schema: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // what jsonschema.UnmarshalJSON does, plus the check for a second value
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("arguments are not JSON: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("arguments are not one JSON value")
	}
	err = sch.Validate(v)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return errors.New(describeViolations(ve))
	}
	return err
}

// schemas caches compiled schemas by their text: tools have a handful.
var schemas sync.Map // string -> *jsonschema.Schema

func compiledSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if s, ok := schemas.Load(string(raw)); ok {
		return s.(*jsonschema.Schema), nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// A schema is the tool's (an MCP server's: untrusted); it names
	// nothing the daemon would read: a $ref or $schema outside it fails.
	c.UseLoader(noLoader{})
	const url = "sessiond:///tool-parameters.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	schemas.Store(string(raw), s)
	return s, nil
}

// noLoader refuses every URL a schema refers to (the compiler's default
// loader reads file:// URLs: a server's schema would have the daemon read
// any file, its own home included, and quote it to the model).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%q is not loaded: a tool schema may refer only to itself and the standard metaschemas", url)
}

var printer = message.NewPrinter(language.English)

// describeViolations joins the leaf violations of e, each as
// "LOCATION: WHAT" ("arguments" for the whole object).
func describeViolations(e *jsonschema.ValidationError) string {
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, location(e.InstanceLocation)+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	return strings.Join(out, "; ")
}

// location renders a JSON pointer's tokens as "questions[0].question".
func location(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if t != "" && strings.Trim(t, "0123456789") == "" && b.Len() > 0 {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	if b.Len() == 0 {
		return "arguments"
	}
	return b.String()
}
