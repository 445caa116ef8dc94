package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// decodeExact decodes the JSON object raw into the struct v points to, as
// json.Unmarshal does, except that keys match the struct's json field names
// (embedded structs included) exactly. encoding/json matches keys
// case-insensitively, so {"command":"ls","Command":"touch x"} would run
// "touch x" while every reader of the stored arguments sees "ls": a key
// that differs from a field name only in case is refused here, whatever
// validated the arguments before. Any other unknown key is refused too,
// unless ignoreUnknown (then it is skipped, as json.Unmarshal does). Errors
// name the first offending key (in sorted order).
func decodeExact(raw json.RawMessage, v any, ignoreUnknown bool) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	if obj == nil {
		return fmt.Errorf("expected a JSON object, got null")
	}
	known := map[string]bool{}
	jsonNames(reflect.TypeOf(v).Elem(), known)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if known[k] {
			continue
		}
		for name := range known {
			if strings.EqualFold(k, name) {
				return fmt.Errorf("argument %q is not %q: keys are case-sensitive", k, name)
			}
		}
		if !ignoreUnknown {
			return fmt.Errorf("unknown argument %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if !ignoreUnknown {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(v)
}

// jsonNames adds the json field names of struct type t to names.
func jsonNames(t reflect.Type, names map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			jsonNames(f.Type, names)
		case !f.IsExported():
		case tag != "":
			names[tag] = true
		default:
			names[f.Name] = true
		}
	}
}
