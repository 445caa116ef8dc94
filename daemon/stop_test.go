package daemon

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestStopClosesConnectionsWith1001 is a regression test: a connection's
// write context once derived from its lifetime context, so cancelling it at
// stop tore the TCP connection down before the 1001 close frame was sent.
func TestStopClosesConnectionsWith1001(t *testing.T) {
	for i := 0; i < 20; i++ {
		home := t.TempDir()
		var buf strings.Builder
		d, err := Start(context.Background(), Options{Home: home, Logger: slog.New(slog.NewTextHandler(&syncW{w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := websocket.Dial(context.Background(), d.desc.URL, &websocket.DialOptions{
			HTTPHeader: map[string][]string{"Authorization": {"Bearer " + d.token}}, Subprotocols: []string{SubprotocolV1}})
		if err != nil {
			t.Fatal(err)
		}
		c.Write(context.Background(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.info"}`))
		c.Read(context.Background())
		errc := make(chan error, 1)
		go func() { _, _, err := c.Read(context.Background()); errc <- err }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d.Stop(ctx)
		cancel()
		err = <-errc
		if websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Fatalf("iteration %d: %v\n%s", i, err, buf.String())
		}
	}
}

type syncW struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncW) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.w.Write(p) }
