package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const pollInterval = 100 * time.Millisecond

// URL is the apiserver's https://127.0.0.1:<port>; it stays the same
// across Stop and Restart.
func (c *Cluster) URL() string { return c.url }

// EtcdURL is etcd's plain-HTTP client URL.
func (c *Cluster) EtcdURL() string { return c.etcdURL }

// Dir is the cluster's temporary directory: pki, etcd data, logs
// (etcd.log, kube-apiserver.log) and the kubeconfig files written.
func (c *Cluster) Dir() string { return c.dir }

// Stop stops the apiserver alone (SIGTERM, graceful); etcd keeps running
// and keeps every object. Stopping a stopped apiserver does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api == nil {
		return nil
	}
	err := c.api.stop()
	c.api = nil
	if err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	return nil
}

// Restart stops the apiserver if it runs and starts it again with the
// same flags and port against the same etcd, then waits for /readyz.
func (c *Cluster) Restart() error {
	if err := c.Stop(); err != nil {
		return err
	}
	return c.startAPIServer()
}

func (c *Cluster) startEtcd() error {
	logPath := filepath.Join(c.dir, "etcd.log")
	p, err := startProc("etcd", filepath.Join(c.binDir, "etcd"), c.etcdArgs, logPath)
	if err != nil {
		return err
	}
	c.etcd = p
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadyTimeout)
	defer cancel()
	err = poll(ctx, p, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, c.etcdURL+"/health")
	})
	if err != nil {
		return fmt.Errorf("etcd not healthy: %w\n--- %s (tail)\n%s", err, logPath, tail(logPath, 40))
	}
	return nil
}

func (c *Cluster) startAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api != nil {
		return errors.New("kube-apiserver is already running")
	}
	logPath := filepath.Join(c.dir, "kube-apiserver.log")
	p, err := startProc("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), c.apiArgs, logPath)
	if err != nil {
		return err
	}
	c.api = p
	if err := c.waitReady(p); err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w\n--- %s (tail)\n%s", err, logPath, tail(logPath, 60))
	}
	return nil
}

// waitReady polls /readyz until it answers 200, then waits for the
// default/kubernetes Service, which the apiserver's bootstrap controller
// creates (with the default namespace) a moment after /readyz turns ok, so
// every test sees it from the start, as in a real cluster.
func (c *Cluster) waitReady(p *proc) error {
	cfg := c.AdminConfig()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("admin http client: %w", err)
	}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadyTimeout)
	defer cancel()
	if err := poll(ctx, p, func(ctx context.Context) error {
		return httpOK(ctx, hc, c.url+"/readyz")
	}); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	return poll(ctx, p, func(ctx context.Context) error {
		_, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		return err
	})
}

// poll calls check every pollInterval until it returns nil, the process
// exits, or ctx ends; the error says which, with check's last error.
func poll(ctx context.Context, p *proc, check func(context.Context) error) error {
	var last error
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v); last check: %v", p.name, err, last)
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last check: %v", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func httpOK(ctx context.Context, hc *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// cleanup stops the apiserver, then etcd, and on failure logs the tails of
// their logs. t.TempDir removes the files afterwards.
func (c *Cluster) cleanup() {
	if err := c.Stop(); err != nil {
		c.t.Errorf("apiserver: %v", err)
	}
	if c.etcd != nil {
		if err := c.etcd.stop(); err != nil {
			c.t.Errorf("apiserver: stop etcd: %v", err)
		}
	}
	if c.t.Failed() {
		for _, name := range []string{"kube-apiserver.log", "etcd.log"} {
			path := filepath.Join(c.dir, name)
			c.t.Logf("--- %s (tail)\n%s", path, tail(path, 40))
		}
	}
}
