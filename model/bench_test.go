package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// BenchmarkStream measures one streamed, tool-less reply of 20 text chunks
// (+ finish, usage, [DONE]) from a local httptest server.
//
//   - stream/flushed: the server flushes every frame (realistic streaming).
//   - stream/one_write: the whole body in one write (client-side cost only).
//   - raw_http/*: the same exchange with a bare net/http POST that reads
//     and discards the body: the floor that model's overhead is measured
//     against.
func BenchmarkStream(b *testing.B) {
	frames := []string{roleChunk()}
	for i := range 20 {
		frames = append(frames, textChunk(fmt.Sprintf("token%02d ", i)))
	}
	frames = append(frames, finishChunk("stop"), usageChunk(120, 20), "[DONE]")
	var whole bytes.Buffer
	for _, f := range frames {
		fmt.Fprintf(&whole, "data: %s\n\n", f)
	}
	flushed := func(w http.ResponseWriter, r *http.Request, _ int64) { sseFrames(w, frames...) }
	oneWrite := func(w http.ResponseWriter, r *http.Request, _ int64) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(whole.Bytes())
	}
	req := Request{Model: "m", Messages: []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Say twenty tokens."},
	}}
	reqBody, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": req.Messages})

	for _, mode := range []struct {
		name string
		h    func(http.ResponseWriter, *http.Request, int64)
	}{{"flushed", flushed}, {"one_write", oneWrite}} {
		b.Run("stream/"+mode.name, func(b *testing.B) {
			s := newServer(b, mode.h)
			c := testClient(s, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				resp, err := c.Stream(ctx, req, func(string) { n++ })
				if err != nil || n != 20 || resp.Usage == nil {
					b.Fatalf("resp=%+v n=%d err=%v", resp, n, err)
				}
			}
		})
		b.Run("raw_http/"+mode.name, func(b *testing.B) {
			s := newServer(b, mode.h)
			hc := &http.Client{Transport: sharedTransport(DefaultConnectTimeout)}
			b.ReportAllocs()
			for b.Loop() {
				res, err := hc.Post(s.URL+"/v1/chat/completions", "application/json", bytes.NewReader(reqBody))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
}
