//go:build integration

package labnet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
)

// Echo describes the lab's echo servers. They answer every TCP connection
// and every UDP datagram with one line, "<Name> peer=<address:port they
// saw>", so that a client learns which backend served it and whether its
// source was NATed (ParseEcho reads the line).
type Echo struct {
	// Name is the first word of every answer, usually the pod's name.
	Name string
	// Lines keeps each TCP connection open after that first line and
	// answers every line the client sends with "<Name> <line>", until the
	// client closes. Without it the server closes right after the first
	// line.
	Lines bool
}

// Serve starts e's TCP server on tcpPort and UDP server on udpPort in h,
// on every address of each family given ("4", "6"; "4" when none).
func (e Echo) Serve(t testing.TB, h *Host, tcpPort, udpPort int, families ...string) {
	t.Helper()
	if len(families) == 0 {
		families = []string{"4"}
	}
	for _, fam := range families {
		e.ServeTCP(t, h, "tcp"+fam, ":"+strconv.Itoa(tcpPort))
		e.ServeUDP(t, h, "udp"+fam, ":"+strconv.Itoa(udpPort))
	}
}

// ServeTCP listens on network ("tcp", "tcp4", "tcp6") and addr inside h
// and serves until the test ends. The listener is created on h's thread,
// so it lives in h's namespace; serving runs on ordinary goroutines.
func (e Echo) ServeTCP(t testing.TB, h *Host, network, addr string) {
	t.Helper()
	ln := listenIn(t, h, network, addr, net.Listen)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go e.answerTCP(c)
		}
	}()
}

func (e Echo) answerTCP(c net.Conn) {
	defer c.Close()
	fmt.Fprintf(c, "%s peer=%s\n", e.Name, c.RemoteAddr())
	if !e.Lines {
		return
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%s %s", e.Name, line)
	}
}

// ServeUDP listens on network ("udp", "udp4", "udp6") and addr inside h
// and answers every datagram until the test ends.
func (e Echo) ServeUDP(t testing.TB, h *Host, network, addr string) {
	t.Helper()
	pc := listenIn(t, h, network, addr, net.ListenPacket)
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s peer=%s\n", e.Name, from)), from)
		}
	}()
}

// listenIn opens a listener on h's thread, so that it lives in h's
// namespace, and closes it when the test ends.
func listenIn[L io.Closer](t testing.TB, h *Host, network, addr string, open func(network, addr string) (L, error)) L {
	t.Helper()
	var l L
	err := h.Do(func() (err error) {
		l, err = open(network, addr)
		return err
	})
	if err != nil {
		t.Fatalf("%s: listen %s %s: %v", h, network, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
