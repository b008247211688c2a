package httpservetest

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Response is what the server answered.
type Response struct {
	Code int
	Body string
}

// FreeAddr returns a loopback host:port whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// ServeAndGet runs serve on a free address until it answers GET path,
// then cancels its context and fails the test unless serve returns nil
// within 10 seconds. It returns the answer to the GET.
func ServeAndGet(t testing.TB, serve func(ctx context.Context, addr string) error, path string) Response {
	t.Helper()
	addr := FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, addr) }()
	var resp *http.Response
	var err error
	for range 100 {
		if resp, err = http.Get("http://" + addr + path); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: read the body: %v", path, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve = %v, want nil after its context is done", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context was done")
	}
	return Response{Code: resp.StatusCode, Body: string(body)}
}
