package daemon

import (
	"net/http/httptest"
	"testing"
)

func TestHostAllowed(t *testing.T) {
	d := &Daemon{cfg: Config{AllowedHosts: []string{"sessiond.internal"}}}
	for host, want := range map[string]bool{
		"127.0.0.1:4000": true, "localhost:4000": true, "LOCALHOST:4000": true, "[::1]:4000": true,
		"127.0.0.1": true, "sessiond.internal:80": true,
		"evil.example:4000": false, "127.0.0.1.evil.example:4000": false, "localhost:evil.example": false,
		"localhost.:4000": false, "0.0.0.0:4000": false, "": false, "[::1]:99999": false,
	} {
		if got := d.hostAllowed(host); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	d := &Daemon{cfg: Config{AllowedOrigins: []string{"https://ide.example"}}}
	r := httptest.NewRequest("GET", "/rpc", nil)
	if !d.originAllowed(r) {
		t.Fatal("no Origin (not a browser) must be allowed")
	}
	for origin, want := range map[string]bool{"https://ide.example": true, "https://attacker.example": false, " ": false, "": false, "null": false} {
		r.Header.Set("Origin", origin)
		if got := d.originAllowed(r); got != want {
			t.Errorf("originAllowed(%q) = %v, want %v", origin, got, want)
		}
	}
}
