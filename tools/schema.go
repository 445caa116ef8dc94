package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
)

// ValidateArgs checks a tool call's arguments (raw JSON text) against the
// tool's published parameters schema (a JSON Schema object, the subset the
// specs use: type, properties, required, minimum, maximum, minLength,
// minItems, maxItems, items, enum).
//
// It follows JSON Schema, not Go: an "integer" is any number with no
// fractional part, so 60, 60.0 and 6e1 are integers and 60.5 is not; a
// number too large for a float64 is out of range. Properties the schema
// does not list are ignored (additionalProperties is not enforced: a model
// that adds a note field still gets its command run). The error names the
// first offending property ("timeout: 0 is less than the minimum 1"), in
// words a model can act on.
func ValidateArgs(schema, args json.RawMessage) error {
	var s jsonSchema
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("tool schema: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("arguments are not JSON: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("arguments are not one JSON value")
	}
	return s.validate("", v)
}

type jsonSchema struct {
	Type       any                    `json:"type"`
	Properties map[string]*jsonSchema `json:"properties"`
	Required   []string               `json:"required"`
	Minimum    *json.Number           `json:"minimum"`
	Maximum    *json.Number           `json:"maximum"`
	MinLength  *int                   `json:"minLength"`
	MinItems   *int                   `json:"minItems"`
	MaxItems   *int                   `json:"maxItems"`
	Items      *jsonSchema            `json:"items"`
	Enum       []any                  `json:"enum"`
}

func (s *jsonSchema) types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

func kindOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isInteger(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// isInteger reports whether n has no fractional part (60.0 and 6e1 are
// integers).
func isInteger(n json.Number) bool {
	f, ok := new(big.Float).SetString(n.String())
	return ok && !f.IsInf() && f.IsInt()
}

func (s *jsonSchema) validate(path string, v any) error {
	name := path
	if name == "" {
		name = "arguments"
	}
	if ts := s.types(); len(ts) > 0 {
		k := kindOf(v)
		ok := false
		for _, t := range ts {
			if t == k || (t == "number" && k == "integer") {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("%s: want %s, got %s", name, strings.Join(ts, " or "), describe(v))
		}
	}
	if len(s.Enum) > 0 {
		found := false
		for _, e := range s.Enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %s is not one of %v", name, describe(v), s.Enum)
		}
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%s: %s is out of range", name, x)
		}
		if s.Minimum != nil {
			if m, _ := s.Minimum.Float64(); f < m {
				return fmt.Errorf("%s: %s is less than the minimum %s", name, x, s.Minimum)
			}
		}
		if s.Maximum != nil {
			if m, _ := s.Maximum.Float64(); f > m {
				return fmt.Errorf("%s: %s is greater than the maximum %s", name, x, s.Maximum)
			}
		}
	case string:
		if s.MinLength != nil && len([]rune(x)) < *s.MinLength {
			return fmt.Errorf("%s: shorter than %d characters", name, *s.MinLength)
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			return fmt.Errorf("%s: %d items, want at least %d", name, len(x), *s.MinItems)
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return fmt.Errorf("%s: %d items, want at most %d", name, len(x), *s.MaxItems)
		}
		if s.Items != nil {
			for i, item := range x {
				if err := s.Items.validate(fmt.Sprintf("%s[%d]", name, i), item); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				return fmt.Errorf("%s is required", join(path, r))
			}
		}
		keys := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if pv, ok := x[k]; ok {
				if err := s.Properties[k].validate(join(path, k), pv); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names a value for an error: its kind, and the value itself when
// it is short.
func describe(v any) string {
	k := kindOf(v)
	switch x := v.(type) {
	case json.Number:
		return k + " " + x.String()
	case string:
		if len(x) <= 40 {
			return fmt.Sprintf("string %q", x)
		}
	case bool:
		return fmt.Sprintf("%v", x)
	}
	return k
}
