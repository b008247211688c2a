//go:build integration

package vme2e

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
)

// checkHandbackWithoutKubeProxy runs the rollback's one-shot (--cleanup
// --cleanup-table-only, as deploy/handback does) on a node where
// kube-proxy never came back: within --cleanup-wait it finds none of
// kube-proxy's rules, so it leaves our nftables table (the node's only
// masquerade), says so in one line, records a KubeProxyRulesMissing
// Warning Event on the Node through the API, and exits 0, since an init
// container that failed would be restarted for ever.
func checkHandbackWithoutKubeProxy(t *testing.T, ctx context.Context, admin kubernetes.Interface, kubeconfig string) {
	var stderr bytes.Buffer
	start := time.Now()
	code := app.Run(ctx, MustParse(t, "--cleanup", "--cleanup-table-only", "--cleanup-wait", "3s",
		"--kubeconfig", kubeconfig, "--hostname-override", nodeName), io.Discard, &stderr)
	took := time.Since(start)
	t.Logf("--cleanup --cleanup-table-only --cleanup-wait=3s exited %d after %v, saying:\n%s", code, took.Round(time.Millisecond), stderr.String())
	if code != app.ExitOK {
		t.Errorf("exited %d; want %d: a one-shot that failed is restarted for ever", code, app.ExitOK)
	}
	if want := "kube-proxy's rules are not in the kernel after 3s"; !strings.Contains(stderr.String(), want) {
		t.Errorf("its log lacks %q", want)
	}
	if took > time.Minute {
		t.Errorf("it took %v; --cleanup-wait=3s bounds the wait", took)
	}
	if !ourTableExists(t) {
		t.Errorf("table inet %s is gone; want it kept while kube-proxy's rules are missing", nft.TableName)
	}
	evs, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + nodeName + ",reason=KubeProxyRulesMissing"})
	if err != nil {
		t.Fatalf("list the Node's Events: %v", err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Type != "Warning" {
		t.Fatalf("Node %s has %d KubeProxyRulesMissing Events (%v); want one Warning", nodeName, len(evs.Items), evs.Items)
	}
	t.Logf("Event on Node %s: %s %s from %s: %.120s...", nodeName, evs.Items[0].Type, evs.Items[0].Reason,
		evs.Items[0].Source.Component, evs.Items[0].Message)
}

// ourTableExists reports whether table inet kube-ipvs-proxy is in the
// kernel.
func ourTableExists(t *testing.T) bool {
	t.Helper()
	conn, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables: %v", err)
	}
	defer conn.CloseLasting()
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	for _, tb := range tables {
		if tb.Name == nft.TableName {
			return true
		}
	}
	return false
}
