package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
	var mu sync.Mutex
	var delays []time.Duration // the proxy's waits, recorded instead of slept
	var hold chan struct{}     // when set, each wait lasts until it is closed
	sleep := func(d time.Duration) {
		mu.Lock()
		delays = append(delays, d)
		h := hold
		mu.Unlock()
		if h != nil {
			<-h
		}
	}
	p, err := Start("127.0.0.1:0", srv.URL, Config{Delay: 20 * time.Millisecond, Sleep: sleep, Every503: 2, EveryReset: 3, EveryMidBody: 5})
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
	if code, n, err := get(); err != nil || code != 200 || n != len(body) {
		t.Fatalf("request 1: %d, %d bytes, %v", code, n, err)
	}
	mu.Lock()
	if !slices.Equal(delays, []time.Duration{20 * time.Millisecond}) {
		t.Fatalf("waits before request 1: %v, want its delay of 20ms", delays)
	}
	mu.Unlock()
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
	// Concurrent requests are counted in flight while they are (held in their delay until all
	// four are), and no longer once answered.
	mu.Lock()
	hold = make(chan struct{})
	mu.Unlock()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { get() })
	}
	for p.Stats().InFlight < 4 { // an event wait: the test's timeout catches a request never counted
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	if m := p.Stats().MaxInFlight; m != 4 {
		t.Fatalf("at most %d in flight of 4 concurrent requests held together", m)
	}
	for p.Stats().InFlight != 0 { // a handler may return just after its client has read the answer
		time.Sleep(time.Millisecond)
	}
}
