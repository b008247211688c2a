package app

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"
	"time"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// recordingBody serves data and records the size of every Read asked of it.
type recordingBody struct {
	r      io.Reader
	asks   []int
	closed bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	b.asks = append(b.asks, len(p))
	return b.r.Read(p)
}

func (b *recordingBody) Close() error { b.closed = true; return nil }

func roundTrip(t *testing.T, body io.ReadCloser) *http.Response {
	t.Helper()
	rt := bufferedBodies{next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: body}, nil
	})}
	resp, err := rt.RoundTrip(&http.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestBufferedBodiesReadTheConnectionInLargePieces: a body read in small
// pieces (as the watch decoder reads events) is read from the connection
// in pieces of the buffer's size, and closing it closes the body.
func TestBufferedBodiesReadTheConnectionInLargePieces(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 10<<10) // 160 KiB
	body := &recordingBody{r: bytes.NewReader(data)}
	resp := roundTrip(t, body)
	var got []byte
	p := make([]byte, 7)
	for {
		n, err := resp.Body.Read(p)
		got = append(got, p[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the body's %d", len(got), len(data))
	}
	if want := len(data)/bodyBufferSize + 1; len(body.asks) > want {
		t.Errorf("%d reads from the connection, want at most %d", len(body.asks), want)
	}
	for _, n := range body.asks {
		if n < bodyBufferSize {
			t.Errorf("a read from the connection asked for %d bytes, want %d", n, bodyBufferSize)
		}
	}
	if err := resp.Body.Close(); err != nil || !body.closed {
		t.Errorf("Close: %v, body closed %v", err, body.closed)
	}
}

// TestBufferedBodiesDeliverWhatHasArrived: a read returns the bytes that
// have arrived without waiting for the buffer to fill, as a watch event
// must.
func TestBufferedBodiesDeliverWhatHasArrived(t *testing.T) {
	pr, pw := io.Pipe()
	resp := roundTrip(t, pr)
	go func() { _, _ = pw.Write([]byte("one event")) }()
	got := make(chan string, 1)
	go func() {
		p := make([]byte, 100)
		n, _ := resp.Body.Read(p)
		got <- string(p[:n])
	}()
	select {
	case s := <-got:
		if s != "one event" {
			t.Errorf("read %q, want %q", s, "one event")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waited for more than had arrived")
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after Close: %v, want the body closed", err)
	}
}

// TestBufferedBodiesPassEmptyBodiesAndErrors: no body, and a failed round
// trip, pass through untouched.
func TestBufferedBodiesPassEmptyBodiesAndErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		resp *http.Response
		err  error
	}{
		{"no body", &http.Response{StatusCode: 204, Body: http.NoBody}, nil},
		{"error", nil, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := bufferedBodies{next: roundTripFunc(func(*http.Request) (*http.Response, error) { return tc.resp, tc.err })}
			resp, err := rt.RoundTrip(&http.Request{})
			if resp != tc.resp || !errors.Is(err, tc.err) {
				t.Errorf("RoundTrip = %v, %v; want %v, %v", resp, err, tc.resp, tc.err)
			}
			if resp != nil && resp.Body != http.NoBody {
				t.Errorf("body replaced: %T", resp.Body)
			}
		})
	}
}

// TestRestConfigBuffersBodies: the API client's transport reads bodies
// through bufferedBodies, with kube-proxy's client settings kept.
func TestRestConfigBuffersBodies(t *testing.T) {
	kubeconfig := t.TempDir() + "/kubeconfig"
	const kc = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(ClientConfig{Kubeconfig: kubeconfig, QPS: 5, Burst: 10, ContentType: "application/vnd.kubernetes.protobuf"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 5 || cfg.Burst != 10 || cfg.ContentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("client settings lost: QPS %v, Burst %v, ContentType %q", cfg.QPS, cfg.Burst, cfg.ContentType)
	}
	if cfg.WrapTransport == nil {
		t.Fatal("no transport wrapper")
	}
	if _, ok := cfg.WrapTransport(http.DefaultTransport).(bufferedBodies); !ok {
		t.Errorf("transport is %T, want bufferedBodies", cfg.WrapTransport(http.DefaultTransport))
	}
}
