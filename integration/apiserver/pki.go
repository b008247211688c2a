package apiserver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certLifetime is long enough for any test run; NotBefore is backdated by
// an hour against clock skew.
const certLifetime = 48 * time.Hour

// pki is the cluster's key material: one CA signs the serving cert and
// every client cert; the service-account key pair signs and verifies
// tokens. Paths are the files kube-apiserver reads.
type pki struct {
	ca       *x509.Certificate
	caKey    crypto.Signer
	caPEM    []byte
	caFile   string
	certFile string // serving cert
	keyFile  string
	saKey    string // service-account signing key (private)
	saPub    string // service-account verification key (public)
}

// certPair is a PEM certificate and its PEM private key.
type certPair struct{ cert, key []byte }

// newPKI writes ca.crt, apiserver.crt/.key and sa.key/.pub into dir. The
// serving cert is valid for 127.0.0.1, localhost, the advertise address,
// the first service IP (the kubernetes Service's ClusterIP) and the
// kubernetes.default.svc names, so clients that reach the apiserver
// through the Service verify it too, and for the extra IPs.
func newPKI(dir string, serviceIP, advertise net.IP, extra ...net.IP) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ca key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kube-ipvs-proxy-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("create ca cert: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse ca cert: %w", err)
	}
	p := &pki{
		ca:       ca,
		caKey:    caKey,
		caPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		caFile:   filepath.Join(dir, "ca.crt"),
		certFile: filepath.Join(dir, "apiserver.crt"),
		keyFile:  filepath.Join(dir, "apiserver.key"),
		saKey:    filepath.Join(dir, "sa.key"),
		saPub:    filepath.Join(dir, "sa.pub"),
	}
	if err := os.WriteFile(p.caFile, p.caPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write ca cert: %w", err)
	}
	if err := p.writeServing(serviceIP, advertise, extra); err != nil {
		return nil, err
	}
	if err := p.writeServiceAccountKeys(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) writeServing(serviceIP, advertise net.IP, extra []net.IP) error {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), serviceIP}
	if advertise != nil && !advertise.Equal(ips[0]) {
		ips = append(ips, advertise)
	}
	ips = append(ips, extra...)
	pair, err := p.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return fmt.Errorf("serving cert: %w", err)
	}
	if err := os.WriteFile(p.certFile, pair.cert, 0o644); err != nil {
		return fmt.Errorf("write serving cert: %w", err)
	}
	if err := os.WriteFile(p.keyFile, pair.key, 0o600); err != nil {
		return fmt.Errorf("write serving key: %w", err)
	}
	return nil
}

func (p *pki) writeServiceAccountKeys() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	priv, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := os.WriteFile(p.saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return fmt.Errorf("write service-account public key: %w", err)
	}
	return nil
}

// clientCert returns a client certificate for user in groups, signed by
// the CA: the apiserver's x509 authenticator maps CN to the user name and
// O to the groups (system:masters is cluster-admin, system:nodes with
// CN system:node:<name> is a kubelet for the Node authorizer).
func (p *pki) clientCert(user string, groups []string) (certPair, error) {
	pair, err := p.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return certPair{}, fmt.Errorf("client cert for %q: %w", user, err)
	}
	return pair, nil
}

// sign fills in serial, validity and key usage, creates a fresh P-256 key
// and signs tmpl with the CA.
func (p *pki) sign(tmpl *x509.Certificate) (certPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certPair{}, fmt.Errorf("generate key: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(certLifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		return certPair{}, fmt.Errorf("sign: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return certPair{}, fmt.Errorf("marshal key: %w", err)
	}
	return certPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return n
}
