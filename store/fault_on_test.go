//go:build faultinject

package store

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestFaultNumberingCountsEachTransaction (make test runs it with -tags
// faultinject, on both drivers): concurrent write transactions, which
// SQLite's committer batches into group commits, are each numbered once,
// in one run of consecutive numbers, under their own label; a transaction
// without a label is named by the function that called InTx; a rolled
// back one is not numbered.
func TestFaultNumberingCountsEachTransaction(t *testing.T) {
	db := openTest(t, Options{})
	var mu sync.Mutex
	seen := map[int64]string{}
	faultObserve = func(n int64, label string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := seen[n]; dup {
			t.Errorf("commit %d numbered twice (%s, %s)", n, prev, label)
		}
		seen[n] = label
	}
	t.Cleanup(func() { faultObserve = nil })
	ctx := context.Background()
	const n = 40
	b0, _ := db.Stats()
	var wg sync.WaitGroup
	release, holding := make(chan struct{}), make(chan struct{})
	if db.pg == nil {
		// SQLite: hold the committer in a first transaction until the n
		// others are queued, so that they form one group commit.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.InTx(ctx, func(tx *Tx) error { tx.Label("holder"); close(holding); <-release; return nil }); err != nil {
				t.Error(err)
			}
		}()
		<-holding
	} else {
		close(release)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.InTx(ctx, func(tx *Tx) error {
				tx.Label(fmt.Sprintf("t%02d", i))
				_, err := tx.Exec("SELECT 1")
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	if db.pg == nil {
		for len(db.reqs) < n {
			runtime.Gosched()
		}
		close(release)
	}
	wg.Wait()
	b1, _ := db.Stats()
	if db.pg == nil && b1-b0 != 2 {
		t.Errorf("%d group commits, want 2 (the holder, then the %d others at once)", b1-b0, n)
	}
	if err := db.InTx(ctx, func(tx *Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, func(tx *Tx) error { tx.Label("rolled-back"); return fmt.Errorf("no") }); err == nil {
		t.Fatal("the failing transaction committed")
	}
	mu.Lock()
	defer mu.Unlock()
	var nums []int64
	var labels []string
	for k, v := range seen {
		nums = append(nums, k)
		labels = append(labels, v)
	}
	slices.Sort(nums)
	slices.Sort(labels)
	for i := 1; i < len(nums); i++ {
		if nums[i] != nums[i-1]+1 {
			t.Errorf("numbers are not consecutive: %v", nums)
			break
		}
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("t%02d", i))
	}
	got := slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return len(l) != 3 || !strings.HasPrefix(l, "t") })
	if !slices.Equal(got, want) {
		t.Errorf("labels %v, want each of t00..t%02d once", got, n-1)
	}
	if !slices.Contains(labels, "store.TestFaultNumberingCountsEachTransaction") {
		t.Errorf("the unlabelled transaction is not named by its caller: %v", labels)
	}
	if slices.Contains(labels, "rolled-back") {
		t.Errorf("a rolled back transaction was numbered")
	}
	t.Logf("%s: %d transactions in %d commits", db.Driver(), n, b1-b0)
}
