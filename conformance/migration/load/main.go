package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: load serve | load client [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch os.Args[1] {
	case "serve":
		serve(ctx)
	case "client":
		client(ctx, os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "load: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve(ctx context.Context) {
	host, _ := os.Hostname()
	var served servedFrom
	go served.report(ctx, 10*time.Second)
	go func() {
		err := http.ListenAndServe(":8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, host)
			served.add(r.RemoteAddr)
		}))
		fmt.Fprintln(os.Stderr, "load: http:", err)
		os.Exit(1)
	}()
	l, err := net.Listen("tcp", ":9000")
	if err != nil {
		fmt.Fprintln(os.Stderr, "load: echo:", err)
		os.Exit(1)
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// servedFrom counts the HTTP requests a backend answered, per client
// address, so that a lost request can be told apart as one the backend
// never saw or one it answered too late.
type servedFrom struct {
	mu     sync.Mutex
	byHost map[string]int
}

func (s *servedFrom) add(remote string) {
	h, _, err := net.SplitHostPort(remote)
	if err != nil {
		h = remote
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byHost == nil {
		s.byHost = map[string]int{}
	}
	s.byHost[h]++
}

// report prints, every period, the requests answered since the last line
// per client address, sorted: `load: serve: HH:MM:SS.mmm 10.244.0.5=60 ...`.
func (s *servedFrom) report(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			by := s.byHost
			s.byHost = nil
			s.mu.Unlock()
			hosts := make([]string, 0, len(by))
			for h, n := range by {
				hosts = append(hosts, fmt.Sprintf("%s=%d", h, n))
			}
			sort.Strings(hosts)
			fmt.Println("load: serve:", now.UTC().Format("15:04:05.000"), strings.Join(hosts, " "))
		}
	}
}

// counts are the client's counters.
type counts struct {
	requests, failed, long, reset, dns, dnsFailed, sticky, stickyMoves atomic.Int64
	logged                                                             atomic.Int64
	slowestMS                                                          atomic.Int64
}

// took records how long an answered request took.
func (c *counts) took(d time.Duration) {
	ms := d.Milliseconds()
	for {
		cur := c.slowestMS.Load()
		if ms <= cur || c.slowestMS.CompareAndSwap(cur, ms) {
			return
		}
	}
}

// fail logs a failure with its time, the first 50 of them.
func (c *counts) fail(what string, err error) {
	if c.logged.Add(1) <= 50 {
		fmt.Fprintf(os.Stderr, "load: %s %s: %v\n", time.Now().UTC().Format("15:04:05.000"), what, err)
	}
}

func client(ctx context.Context, args []string) {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	targets := fs.String("http", "", "comma-separated URLs; a new connection per request")
	rate := fs.Int("rate", 12, "HTTP requests per second, over the targets in turn")
	long := fs.String("long", "", "HOST:PORT of a line echo server for long-lived connections")
	longCount := fs.Int("long-count", 4, "long-lived connections")
	dns := fs.String("dns", "", "NAME@SERVER:PORT: a UDP DNS query every 200 ms")
	sticky := fs.String("sticky", "", "URL of a sessionAffinity: ClientIP Service, asked every 500 ms")
	_ = fs.Parse(args)

	var c counts
	if *long != "" {
		for i := 0; i < *longCount; i++ {
			go longLived(ctx, &c, *long, i)
		}
	}
	if *targets != "" {
		go requests(ctx, &c, strings.Split(*targets, ","), *rate)
	}
	if *dns != "" {
		go queries(ctx, &c, *dns)
	}
	if *sticky != "" {
		go stickiness(ctx, &c, *sticky)
	}
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintln(os.Stderr, "load: progress:", time.Now().UTC().Format("15:04:05.000"), line(&c))
			}
		}
	}()
	// The counts go out as soon as the client is told to stop: waiting
	// for a request or a read in flight (up to its 10 s limit) could
	// outlast the pod's grace period, and a killed client says nothing.
	<-ctx.Done()
	fmt.Println("load:", line(&c))
}

func line(c *counts) string {
	return fmt.Sprintf("requests=%d failed=%d long-lived=%d reset=%d dns=%d dns-failed=%d sticky=%d sticky-moves=%d slowest-ms=%d",
		c.requests.Load(), c.failed.Load(), c.long.Load(), c.reset.Load(), c.dns.Load(), c.dnsFailed.Load(),
		c.sticky.Load(), c.stickyMoves.Load(), c.slowestMS.Load())
}

// A request that has no answer in 10 s has failed. Under TCG a node's
// CPU can stall a healthy request for seconds (module loads, image
// imports), so a shorter limit would count slowness as failure; the
// slowest answer is reported beside the counts instead.
var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
}

// connTrace is what a failed request says about its connection: whether
// the handshake ever completed (a dropped SYN and a stalled backend both
// end in the same client timeout) and, if it did, from which local port,
// so that the request can be found in a node's conntrack or packet log.
type connTrace struct {
	start     time.Time
	connected atomic.Int64 // ns after start; 0: never
	local     atomic.Value // string
	wrote     atomic.Int64 // ns after start the request was written in full; 0: never
}

func (t *connTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			t.connected.Store(int64(time.Since(t.start)))
			t.local.Store(i.Conn.LocalAddr().String())
		},
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				t.wrote.Store(int64(time.Since(t.start)))
			}
		},
	}
}

// String says how far the request got, for its failure line.
func (t *connTrace) String() string {
	c := time.Duration(t.connected.Load())
	if c == 0 {
		return "never connected"
	}
	s := fmt.Sprintf("connected after %d ms from %v", c.Milliseconds(), t.local.Load())
	if w := time.Duration(t.wrote.Load()); w != 0 {
		s += fmt.Sprintf(", request written after %d ms", w.Milliseconds())
	}
	return s
}

func get(url string, trace *connTrace) (string, error) {
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace.clientTrace()), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(b)), nil
}

// requests sends rate requests per second, each on a new connection,
// without waiting for the previous one.
func requests(ctx context.Context, c *counts, targets []string, rate int) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		url := targets[i%len(targets)]
		c.requests.Add(1)
		wg.Go(func() {
			start := time.Now()
			trace := &connTrace{start: start}
			if _, err := get(url, trace); err != nil {
				c.failed.Add(1)
				// The start, beside the failure's own time: a timeout is
				// seen 10 s after the request that met the fault.
				c.fail("GET "+url+" (sent "+start.UTC().Format("15:04:05.000")+"; "+trace.String()+")", err)
				return
			}
			c.took(time.Since(start))
		})
	}
}

// longLived keeps one connection and exchanges a line every 100 ms; any
// error ends it as reset. A connection never made is a reset too.
func longLived(ctx context.Context, c *counts, addr string, id int) {
	c.long.Add(1)
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		c.reset.Add(1)
		c.fail(fmt.Sprintf("long-lived %d dial %s", id, addr), err)
		return
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		msg := fmt.Sprintf("%d %d\n", id, n)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, msg); err != nil {
			c.reset.Add(1)
			c.fail(fmt.Sprintf("long-lived %d write", id), err)
			return
		}
		got, err := r.ReadString('\n')
		if err != nil || got != msg {
			c.reset.Add(1)
			c.fail(fmt.Sprintf("long-lived %d read (got %q)", id, got), err)
			return
		}
	}
}

// queries resolves NAME through SERVER over UDP every 200 ms.
func queries(ctx context.Context, c *counts, spec string) {
	name, server, ok := strings.Cut(spec, "@")
	if !ok {
		fmt.Fprintln(os.Stderr, "load: -dns wants NAME@SERVER:PORT")
		os.Exit(2)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.dns.Add(1)
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.LookupHost(qctx, name)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.dnsFailed.Add(1)
			c.fail("DNS "+name+"@"+server, err)
		}
	}
}

// stickiness asks a sessionAffinity: ClientIP Service which backend
// answers; a change of backend counts as a move.
func stickiness(ctx context.Context, c *counts, url string) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.sticky.Add(1)
		c.requests.Add(1)
		trace := &connTrace{start: time.Now()}
		host, err := get(url, trace)
		if err != nil {
			c.failed.Add(1)
			c.fail("sticky GET "+url+" ("+trace.String()+")", err)
			continue
		}
		if last != "" && host != last {
			c.stickyMoves.Add(1)
			c.fail("sticky", fmt.Errorf("backend moved from %s to %s", last, host))
		}
		last = host
	}
}
