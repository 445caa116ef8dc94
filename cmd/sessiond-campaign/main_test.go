package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/fixtures"
	"github.com/sessiond/sessiond/fixtures/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	fixtures.CleanupBinaries()
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// TestCampaignSmall runs a short campaign in-process against the real
// daemon (built with -race under -race): two daemons, a dozen faults of
// every kind the seed draws, then the invariants. It must end with every
// invariant held, every fault counted and every acknowledged input
// terminal.
func TestCampaignSmall(t *testing.T) {
	o := options{sessiond: fixtures.BuildBinaries(t), daemons: 2, sessions: 2, kills: 12, seed: 4,
		interval: 400 * time.Millisecond, leaseTTL: 2, drain: 2 * time.Minute}
	c, err := newCampaign(o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.logOut = &out
	code := c.run()
	c.close()
	if code != 0 || !strings.Contains(out.String(), "every invariant held") || !strings.Contains(out.String(), "seed 4, ") {
		t.Fatalf("campaign exit %d:\n%s", code, out.String())
	}
	if n := sum(c.faults); n != 12 {
		t.Errorf("%d faults injected, want 12: %v", n, c.faults)
	}
	if len(c.acked) == 0 {
		t.Errorf("no input acknowledged:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}

// TestCampaignRefusesBadFlags: flags that cannot make a campaign are
// refused before anything starts.
func TestCampaignRefusesBadFlags(t *testing.T) {
	if _, err := newCampaign(options{sessiond: "/nonexistent/sessiond", daemons: 2, sessions: 1, interval: time.Second, leaseTTL: 2}); err == nil ||
		!strings.Contains(err.Error(), "--sessiond") {
		t.Fatalf("a missing binary: %v", err)
	}
}
