//go:build !integration

package apiserver

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/util/keyutil"
)

// These run without the binaries: they check the key material and the
// YAML splitting that Start and Apply rely on.

func TestPKI(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(dir, net.ParseIP("10.96.0.1"), net.ParseIP("203.0.113.10"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)

	t.Run("serving cert verifies for every name a client may dial", func(t *testing.T) {
		cert := readCert(t, p.certFile)
		for _, name := range []string{"127.0.0.1", "10.96.0.1", "203.0.113.10", "localhost", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
			opts := x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("verify for %s: %v", name, err)
			}
		}
	})
	t.Run("client cert carries user and groups", func(t *testing.T) {
		pair, err := p.clientCert("system:node:node-a", []string{"system:nodes"})
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(pair.cert)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := cert.Verify(opts); err != nil {
			t.Fatalf("verify client cert: %v", err)
		}
		if cert.Subject.CommonName != "system:node:node-a" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
			t.Fatalf("subject %v, want CN=system:node:node-a O=system:nodes", cert.Subject)
		}
	})
	t.Run("service-account keys parse as the apiserver parses them", func(t *testing.T) {
		if _, err := keyutil.PrivateKeyFromFile(p.saKey); err != nil {
			t.Errorf("signing key: %v", err)
		}
		if _, err := keyutil.PublicKeysFromFile(p.saPub); err != nil {
			t.Errorf("public key: %v", err)
		}
	})
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestDecodeFile(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    []string // kind/name
		wantErr bool
	}{
		{
			name: "multi-document with empty documents",
			yaml: "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
			want: []string{"Namespace/a", "ConfigMap/b"},
		},
		{
			name: "list is expanded",
			yaml: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: sa-x}\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: sa-y}\n",
			want: []string{"ServiceAccount/sa-x", "ServiceAccount/sa-y"},
		},
		{
			name:    "missing kind is an error",
			yaml:    "apiVersion: v1\nmetadata: {name: a}\n",
			wantErr: true,
		},
		{
			name:    "malformed yaml is an error",
			yaml:    "apiVersion: v1\nkind: [\n",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "objects.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := decodeFile(path)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %d objects, want an error", len(objs))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}
