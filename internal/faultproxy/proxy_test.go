package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFaults: the proxy forwards, delays, answers 503, resets before the answer and halfway
// through the body, on the requests its rules pick, and counts them.
func TestFaults(t *testing.T) {
	body := strings.Repeat("x", 1<<16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "" {
			t.Error("no Host header")
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	p, err := Start("127.0.0.1:0", srv.URL, Config{Delay: 20 * time.Millisecond, Every503: 2, EveryReset: 3, EveryMidBody: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (int, int, error) {
		resp, err := client.Get(p.URL() + "/obj")
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, len(b), err
	}
	// Requests 1..5: forward, 503, reset, 503, mid-body reset.
	t0 := time.Now()
	if code, n, err := get(); err != nil || code != 200 || n != len(body) {
		t.Fatalf("request 1: %d, %d bytes, %v", code, n, err)
	}
	if time.Since(t0) < 20*time.Millisecond {
		t.Fatal("no delay")
	}
	if code, _, err := get(); err != nil || code != 503 {
		t.Fatalf("request 2: %d, %v; want 503", code, err)
	}
	if _, _, err := get(); err == nil {
		t.Fatal("request 3: no error; want a reset connection")
	}
	get()
	if code, n, err := get(); err == nil || n >= len(body) {
		t.Fatalf("request 5: %d, %d bytes, %v; want an error after part of the body", code, n, err)
	}
	st := p.Stats()
	if st.Requests != 5 || st.Faults != 4 || st.Forwarded != 2 || st.Bytes != uint64(len(body)) {
		t.Fatalf("stats %+v", st)
	}
	// Concurrent requests are counted in flight, while they are and no longer once answered.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { get() })
	}
	seen := int64(0)
	for deadline := time.Now().Add(time.Second); seen < 1 && time.Now().Before(deadline); {
		seen = max(seen, p.Stats().InFlight)
	}
	wg.Wait()
	if m := p.Stats().MaxInFlight; m < 2 {
		t.Fatalf("at most %d in flight of 4 concurrent requests delayed 20 ms", m)
	}
	after := p.Stats().InFlight // a handler may return just after its client has read the answer
	for deadline := time.Now().Add(time.Second); after != 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		after = p.Stats().InFlight
	}
	if seen < 1 || after != 0 {
		t.Fatalf("in flight: %d seen during 4 concurrent requests delayed 20 ms, %d after; want >= 1, then 0", seen, after)
	}
}
