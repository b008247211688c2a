package ipvs

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// procTable is /proc/net/ip_vs of the network namespace the kernel
// handle was made in. /proc/net follows the reading thread's namespace
// at open, so the file is opened once, beside the netlink sockets, and
// read again from its start each time.
type procTable struct {
	mu      sync.Mutex
	f       *os.File
	openErr error
	last    map[Key]int // the last read's counts, refilled by the next
	buf     []byte
}

// openProcTable opens the table. A node whose /proc hides it still runs
// the proxy, as it runs kube-proxy, which never reads it: counts then
// reports the open's error, and Check goes without the count.
func openProcTable() *procTable {
	f, err := os.Open("/proc/thread-self/net/ip_vs")
	return &procTable{f: f, openErr: err}
}

func (p *procTable) counts() (map[Key]int, error) {
	if p.openErr != nil {
		return nil, fmt.Errorf("open the IPVS table in /proc: %w", p.openErr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind %s: %w", p.f.Name(), err)
	}
	if p.last == nil {
		p.last, p.buf = map[Key]int{}, make([]byte, procReadBuffer)
	}
	if err := parseDestinationCounts(p.f, p.last, p.buf); err != nil {
		return nil, fmt.Errorf("%s: %w", p.f.Name(), err)
	}
	return p.last, nil
}

func (p *procTable) Close() {
	if p.f != nil {
		p.f.Close()
	}
}
