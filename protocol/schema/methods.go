package schema

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sessiond/sessiond/protocol"
)

// Markers of the generated method table in docs/protocol.md.
const (
	MethodTableBegin = "<!-- BEGIN method table: generated from protocol.Methods; go test ./protocol/schema -run TestDocsMethodTable -update rewrites it -->"
	MethodTableEnd   = "<!-- END method table -->"
)

// MethodTable is the Markdown table of protocol.Methods that
// docs/protocol.md carries between MethodTableBegin and MethodTableEnd
// (markers included, final newline): one row per method with its scope and
// the $defs names of docs/schema.json of its params and result.
func MethodTable() string {
	var b strings.Builder
	b.WriteString(MethodTableBegin + "\n")
	b.WriteString("| method | scope | params | result |\n|---|---|---|---|\n")
	for _, m := range protocol.Methods {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | `%s` |\n", m.Name, m.Scope, reflect.TypeOf(m.Params).Name(), reflect.TypeOf(m.Result).Name())
	}
	b.WriteString(MethodTableEnd + "\n")
	return b.String()
}
