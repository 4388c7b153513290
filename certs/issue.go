package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
)

// notBeforeSkew backdates certificates so that a client whose clock is a little behind
// still accepts a certificate issued just now.
const notBeforeSkew = time.Minute

// Subject names, for people reading a certificate.
const (
	caCommonName      = "gitops-reverser-webhook-ca"
	servingCommonName = "gitops-reverser-webhook"
)

// NewCA creates a self-signed ECDSA P-256 CA valid from now for validity, as PEM.
func NewCA(now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl, err := template(caCommonName, now, now.Add(validity))
	if err != nil {
		return nil, nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the CA: %w", err)
	}
	return encode(der, key)
}

// Issue creates an ECDSA P-256 serving certificate for names, signed by the first CA of
// caPEM, valid from now for validity but never past the CA's own end.
func Issue(caPEM, caKeyPEM []byte, names Names, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	ca, err := parseFirst(caPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA: %w", err)
	}
	caKey, err := parseSigner(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the serving key: %w", err)
	}
	notAfter := now.Add(validity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl, err := template(servingCommonName, now, notAfter)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames = names.DNSNames
	tmpl.IPAddresses = names.IPs
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	return encode(der, key)
}

// template is a certificate template with a random 128-bit serial number.
func template(commonName string, now, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-notBeforeSkew),
		NotAfter:     notAfter,
	}, nil
}

// encode renders a certificate and its key as PEM (the key as PKCS#8).
func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the private key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

// mergeBundle puts caPEM first and keeps the CAs of oldBundle that are still valid at now, so
// clients keep trusting certificates the previous CA signed while replicas switch over.
// Unparsable, non-CA, expired and duplicate entries are dropped.
func mergeBundle(caPEM, oldBundle []byte, now time.Time) ([]byte, error) {
	first, err := parseFirst(caPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the new CA: %w", err)
	}
	keep := []*x509.Certificate{first}
	old, _ := certutil.ParseCertsPEM(oldBundle) // a damaged bundle is replaced, not kept
	for _, c := range old {
		if c.IsCA && now.Before(c.NotAfter) && !containsCert(keep, c) {
			keep = append(keep, c)
		}
	}
	return certutil.EncodeCertificates(keep...)
}

// containsCert reports whether c is already among certs.
func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, k := range certs {
		if bytes.Equal(k.Raw, c.Raw) {
			return true
		}
	}
	return false
}

// apply carries out a step on a copy of the Secret's data: it creates the CA and issues the
// serving certificate the plan asks for, and drops expired CAs from the bundle.
func (p renewalPolicy) apply(plan step, data map[string][]byte, now time.Time) (map[string][]byte, error) {
	out := maps.Clone(data)
	if out == nil {
		out = map[string][]byte{}
	}
	newCA := out[keyCACert]
	if plan.NewCA {
		caPEM, caKey, err := NewCA(now, p.CAValidity)
		if err != nil {
			return nil, err
		}
		newCA, out[keyCAKey] = caPEM, caKey
	}
	bundle, err := mergeBundle(newCA, out[keyCACert], now)
	if err != nil {
		return nil, err
	}
	out[keyCACert] = bundle
	if plan.NewCert {
		crt, key, err := Issue(bundle, out[keyCAKey], p.Names, now, p.CertValidity)
		if err != nil {
			return nil, err
		}
		out[corev1.TLSCertKey], out[corev1.TLSPrivateKeyKey] = crt, key
	}
	return out, nil
}
