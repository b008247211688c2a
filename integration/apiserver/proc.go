package apiserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopTimeout is how long a child gets to exit after SIGTERM before it is
// killed.
const stopTimeout = 30 * time.Second

// proc is one run of a child process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// startProc starts path with args, appending stdout and stderr to logPath
// (appending, so a restart keeps the earlier run's lines).
func startProc(name, path string, args []string, logPath string) (*proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(log, "=== %s start %s: %s %q\n", name, time.Now().Format(time.RFC3339Nano), path, args)
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits for the exit, SIGKILLing after stopTimeout.
// An exit caused by our SIGTERM is not an error.
func (p *proc) stop() error {
	if done, _ := p.exited(); done {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, stopTimeout)
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago (listen on :0, note the port, close).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
