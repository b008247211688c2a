package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/httpservetest"
)

var hello = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hi") })

// TestServeUntilTheContextIsDone: the handler is served until the context
// is done, then Serve returns nil.
func TestServeUntilTheContextIsDone(t *testing.T) {
	got := httpservetest.ServeAndGet(t, func(ctx context.Context, addr string) error {
		return Serve(ctx, "things", addr, hello)
	}, "/")
	if got.Code != http.StatusOK || got.Body != "hi" {
		t.Errorf("GET / = %d %q, want 200 %q", got.Code, got.Body, "hi")
	}
}

// TestServeListenFailureNamesServerAndAddress: a bound address is a
// wrapped listen error naming the server and the address.
func TestServeListenFailureNamesServerAndAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = Serve(context.Background(), "things", l.Addr().String(), hello)
	var opErr *net.OpError
	want := "listen for things on " + l.Addr().String()
	if !errors.As(err, &opErr) || !strings.Contains(err.Error(), want) {
		t.Errorf("Serve = %v, want a wrapped listen error containing %q", err, want)
	}
}
