package tools

import (
	"context"
	"testing"
)

// BenchmarkRunTerminalTrue measures a whole terminal call of a command that
// leaves nothing behind: the exit grace ends at once (one scan of the
// group).
func BenchmarkRunTerminalTrue(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := RunTerminal(context.Background(), "true", TerminalOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupHasLive measures one scan for the live members of a
// process group (here, of a group that does not exist).
func BenchmarkGroupHasLive(b *testing.B) {
	for i := 0; i < b.N; i++ {
		groupHasLive(1 << 30)
	}
}
