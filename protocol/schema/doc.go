// Package schema builds the JSON Schema (draft 2020-12) document of the
// protocol from the Go types of package protocol: `sessiond schema` prints
// it and docs/schema.json is a committed copy (a test fails when it drifts).
//
// Layout: $defs holds one definition per type (params, results, payloads,
// shared shapes, enums); $defs.SessionEvent is the session.event
// notification's params, a oneOf discriminated by "type" whose payload is the
// type's payload; $defs.ErrorReason enumerates error.data.reason;
// $defs.ServerFrame is any frame the daemon sends. The non-validating
// keyword "x-methods" maps each method name to the $refs of its params and
// result.
package schema
