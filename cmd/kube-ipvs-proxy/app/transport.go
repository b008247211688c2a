package app

import (
	"bufio"
	"io"
	"net/http"
)

// bodyBufferSize is how much of a response body is read from the
// connection at a time.
const bodyBufferSize = 32 << 10

// bufferedBodies is a RoundTripper whose response bodies are read from the
// connection up to bodyBufferSize bytes at a time, whatever the reader
// asks for. client-go's watch decoder reads each event in small pieces
// (a length, then the object), and over HTTP/2 every 4 KiB read from a
// body sends the apiserver a WINDOW_UPDATE frame, each a TLS record and a
// write. At a cold start the informers stream 10,000 Services and
// EndpointSlices that way; in the VM lab those writes were a fifth to a
// quarter of the proxy's CPU while it listed (issue 11). A read returns
// what has arrived, as before: no event waits for the buffer to fill.
type bufferedBodies struct{ next http.RoundTripper }

func (b bufferedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	resp.Body = &bufferedBody{Reader: bufio.NewReaderSize(resp.Body, bodyBufferSize), body: resp.Body}
	return resp, nil
}

// bufferedBody reads through the buffer and closes the body.
type bufferedBody struct {
	*bufio.Reader
	body io.Closer
}

func (b *bufferedBody) Close() error { return b.body.Close() }
