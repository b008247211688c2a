package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ReadHeaderTimeout bounds slow clients on every server of the node agent.
const ReadHeaderTimeout = 5 * time.Second

// ShutdownGrace bounds how long Serve waits for in-flight requests once
// its context is done.
const ShutdownGrace = 5 * time.Second

// Serve listens on addr (host:port) and serves handler until ctx is done,
// then shuts the server down, waiting up to ShutdownGrace for in-flight
// requests. It returns the listen error, a serving error, or nil after ctx
// is done. what names the server in errors: "listen for what on addr: …",
// "serve what on addr: …", "shut down what on addr: …".
func Serve(ctx context.Context, what, addr string, handler http.Handler) error {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for %s on %s: %w", what, addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: ReadHeaderTimeout}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve %s on %s: %w", what, addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down %s on %s: %w", what, addr, err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s on %s: %w", what, addr, err)
	}
	return nil
}
