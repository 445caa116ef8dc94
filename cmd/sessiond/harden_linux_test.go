package main

import "testing"

func TestHardenMakesTheProcessUndumpable(t *testing.T) {
	if err := harden(); err != nil {
		t.Fatal(err)
	}
	if d, err := dumpable(); err != nil || d {
		t.Fatalf("dumpable after harden: %v %v", d, err)
	}
}
