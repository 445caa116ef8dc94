package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/protocol"
)

// Decode unmarshals params into v. A missing params value decodes as {}.
// Wrong JSON types come back as ErrInvalidParams naming the field, e.g.
// `invalid params: "cwd" must be string, not number`. Unknown fields are
// ignored so that newer clients work with older daemons, but member names
// are case-sensitive: a name that differs from a field of v only by case
// ("Session_ID") is refused with invalid_params naming it, where
// encoding/json alone would silently take it for the field.
func Decode(params json.RawMessage, v any) error {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := checkMemberCase(params, v); err != nil {
		return err
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return protocol.Errorf(protocol.ReasonInvalidParams, "invalid params: %q must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value).With("field", field)
		}
		return protocol.Errorf(protocol.ReasonInvalidParams, "invalid params: %v", err)
	}
	if v, ok := v.(protocol.Validator); ok {
		return v.Validate()
	}
	return nil
}

// fieldNames caches, per struct type, the JSON member names of its fields.
var fieldNames sync.Map // reflect.Type → map[string]bool

// checkMemberCase refuses a top-level member of the params object whose
// name matches a field of *v only case-insensitively.
func checkMemberCase(params json.RawMessage, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	// Walk the top-level member names only, skipping their values: no
	// map is built, whatever the object's size.
	dec := json.NewDecoder(bytes.NewReader(params))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: json.Unmarshal reports it
	}
	names := structNames(t.Elem())
	var skip json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		m, _ := tok.(string)
		if !names[m] {
			for n := range names {
				if strings.EqualFold(m, n) {
					return protocol.Errorf(protocol.ReasonInvalidParams, "invalid params: unknown member %q; member names are case-sensitive: did you mean %q?", m, n).With("field", m)
				}
			}
		}
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

func structNames(t reflect.Type) map[string]bool {
	if n, ok := fieldNames.Load(t); ok {
		return n.(map[string]bool)
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	fieldNames.Store(t, names)
	return names
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case goKind == "slice", goKind == "array":
		return "an array"
	case goKind == "map", goKind == "struct", goKind == "ptr":
		return "an object"
	}
	return goKind
}
