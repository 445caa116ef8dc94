package admission

import "time"

// SetRetryBackoff shortens the store-failure retry backoff for a test and
// returns a func that restores it.
func SetRetryBackoff(lo, hi time.Duration) (restore func()) {
	oldLo, oldHi := retryMin, retryMax
	retryMin, retryMax = lo, hi
	return func() { retryMin, retryMax = oldLo, oldHi }
}
