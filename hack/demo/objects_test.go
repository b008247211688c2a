//go:build !integration

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
)

// object is the part of a YAML document needed to tell kinds apart.
type object struct {
	Kind  string            `json:"kind"`
	Items []json.RawMessage `json:"items"`
}

// documents returns the file's objects as JSON, `kind: List` expanded.
func documents(path string) ([]json.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []json.RawMessage
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var o object
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if o.Kind == "List" {
			out = append(out, o.Items...)
		} else if len(raw) > 0 && string(raw) != "null" {
			out = append(out, raw)
		}
	}
}

// createNodes creates the file's Nodes and writes their status (their
// addresses): server-side apply refuses a dual-stack node's two
// InternalIP entries (the list's merge key is the type), and it never
// writes status anyway.
func createNodes(ctx context.Context, cs kubernetes.Interface, path string) error {
	docs, err := documents(path)
	if err != nil {
		return err
	}
	for _, raw := range docs {
		var n corev1.Node
		if err := json.Unmarshal(raw, &n); err != nil || n.Kind != "Node" {
			continue
		}
		created, err := cs.CoreV1().Nodes().Create(ctx, &n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		created.Status = n.Status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", n.Name, err)
		}
	}
	return nil
}

// writeServiceStatus copies the load balancer status of the file's
// Services, which Apply leaves out, onto the live objects.
func writeServiceStatus(ctx context.Context, cs kubernetes.Interface, path string) error {
	docs, err := documents(path)
	if err != nil {
		return err
	}
	for _, raw := range docs {
		var s corev1.Service
		if err := json.Unmarshal(raw, &s); err != nil || s.Kind != "Service" || len(s.Status.LoadBalancer.Ingress) == 0 {
			continue
		}
		live, err := cs.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		live.Status = s.Status
		if _, err := cs.CoreV1().Services(s.Namespace).UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("service %s/%s status: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}
