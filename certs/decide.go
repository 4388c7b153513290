package certs

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Secret keys beside tls.crt and tls.key. ca.crt is the bundle clients trust (cert-manager's
// key); ca.key is the self-managed CA's private key, which renewals need.
const (
	keyCACert = "ca.crt"
	keyCAKey  = "ca.key"
)

// maxPropagationGrace bounds how long a renewal waits for a new CA to reach every client.
const maxPropagationGrace = time.Minute

// minRecheck keeps a decision that is due "now" from turning into a busy loop.
const minRecheck = 100 * time.Millisecond

// Names are the subject alternative names a serving certificate must carry, exactly.
type Names struct {
	DNSNames []string
	IPs      []net.IP
}

// renewalPolicy holds the lifetimes the self-managed issuer enforces; the decisions read only it,
// the Secret's data and the time.
type renewalPolicy struct {
	Names         Names
	CAValidity    time.Duration
	CARenewBefore time.Duration
	CertValidity  time.Duration
	RenewBefore   time.Duration
}

// step is the issuer's next step for its Secret.
type step struct {
	// NewCA asks for a new CA, put first in the bundle before the still-valid old ones.
	NewCA bool
	// NewCert asks for a serving certificate from the bundle's first CA.
	NewCert bool
	// Reason says why, for the logs.
	Reason string
	// RecheckAfter is when the decision may change, when there is nothing to do now.
	RecheckAfter time.Duration
}

// NeedsRenewal decides whether a serving certificate must be replaced at now: it cannot be
// parsed, is not valid yet, has expired, is inside its renewal window, or does not carry
// exactly the wanted names. The reason is for logs and status.
func NeedsRenewal(certPEM []byte, now time.Time, renewBefore time.Duration, want Names) (bool, string) {
	c, err := parseFirst(certPEM)
	if err != nil {
		return true, err.Error()
	}
	if why := outsideValidity(c, now, renewBefore); why != "" {
		return true, why
	}
	if !sameStrings(c.DNSNames, want.DNSNames) {
		return true, fmt.Sprintf("DNS names are %v, want %v", c.DNSNames, want.DNSNames)
	}
	if !sameStrings(ipStrings(c.IPAddresses), ipStrings(want.IPs)) {
		return true, fmt.Sprintf("IP addresses are %v, want %v", c.IPAddresses, want.IPs)
	}
	return false, ""
}

// CANeedsRenewal decides whether the signing CA (the first certificate of the bundle) must be
// replaced at now: it cannot be parsed, is not a CA, does not match its key, or is expired or
// inside its renewal window.
func CANeedsRenewal(bundlePEM, keyPEM []byte, now time.Time, renewBefore time.Duration) (bool, string) {
	ca, err := parseFirst(bundlePEM)
	if err != nil {
		return true, "CA: " + err.Error()
	}
	if !ca.IsCA {
		return true, "CA: the first certificate of the bundle is not a CA"
	}
	if err := matchKey(ca, keyPEM); err != nil {
		return true, "CA: " + err.Error()
	}
	if why := outsideValidity(ca, now, renewBefore); why != "" {
		return true, "CA: " + why
	}
	return false, ""
}

// decide says what the issuer does with a Secret's data at now. A CA due for rotation is
// replaced first while a still-usable serving certificate is kept (its old CA stays in the
// bundle); a serving certificate due for renewal is issued once its CA is older than the
// propagation grace, so clients already trust the new CA — unless it cannot serve at all.
func (p renewalPolicy) decide(data map[string][]byte, now time.Time) step {
	if due, why := CANeedsRenewal(data[keyCACert], data[keyCAKey], now, p.CARenewBefore); due {
		usable := servingProblem(data, now, 0, p.Names) == ""
		return step{NewCA: true, NewCert: !usable, Reason: why}
	}
	if why := servingProblem(data, now, p.RenewBefore, p.Names); why != "" {
		if servingProblem(data, now, 0, p.Names) == "" {
			if wait := p.graceLeft(data[keyCACert], now); wait > 0 {
				// Not past the certificate's end: it is unusable then, and renewed at once.
				return step{Reason: why + "; waiting for the new CA to reach every client", RecheckAfter: min(wait, untilExpiry(data, now))}
			}
		}
		return step{NewCert: true, Reason: why}
	}
	return step{RecheckAfter: p.nextDue(data, now)}
}

// servingProblem says why the Secret's serving pair cannot stay (empty: it can): the
// certificate needs renewal within renewBefore, the key does not match, or it does not chain
// to the bundle. renewBefore 0 asks whether the pair can serve at all.
func servingProblem(data map[string][]byte, now time.Time, renewBefore time.Duration, want Names) string {
	if due, why := NeedsRenewal(data[corev1.TLSCertKey], now, renewBefore, want); due {
		return why
	}
	if _, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
		return "serving key: " + err.Error()
	}
	if err := chainsTo(data[corev1.TLSCertKey], data[keyCACert], now); err != nil {
		return "serving certificate: " + err.Error()
	}
	return ""
}

// untilExpiry is how long the Secret's serving certificate has left (0 when it cannot be read).
func untilExpiry(data map[string][]byte, now time.Time) time.Duration {
	leaf, err := parseFirst(data[corev1.TLSCertKey])
	if err != nil {
		return 0
	}
	return max(leaf.NotAfter.Sub(now), 0)
}

// graceLeft is how long a serving certificate waits before being signed by a CA created this
// recently: half the renewal window, at most maxPropagationGrace.
func (p renewalPolicy) graceLeft(bundlePEM []byte, now time.Time) time.Duration {
	ca, err := parseFirst(bundlePEM)
	if err != nil {
		return 0
	}
	grace := min(p.RenewBefore/2, maxPropagationGrace)
	created := ca.NotBefore.Add(notBeforeSkew)
	return created.Add(grace).Sub(now)
}

// nextDue is the time until the CA or the serving certificate enters its renewal window.
func (p renewalPolicy) nextDue(data map[string][]byte, now time.Time) time.Duration {
	ca, errCA := parseFirst(data[keyCACert])
	leaf, errLeaf := parseFirst(data[corev1.TLSCertKey])
	if errCA != nil || errLeaf != nil {
		return minRecheck
	}
	untilCA := ca.NotAfter.Add(-p.CARenewBefore).Sub(now)
	untilLeaf := leaf.NotAfter.Add(-p.RenewBefore).Sub(now)
	return max(min(untilCA, untilLeaf), minRecheck)
}

// outsideValidity says why c is not fine at now with renewBefore to spare (empty: it is).
func outsideValidity(c *x509.Certificate, now time.Time, renewBefore time.Duration) string {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Sprintf("not valid before %s", c.NotBefore.Format(time.RFC3339))
	case !now.Before(c.NotAfter):
		return fmt.Sprintf("expired at %s", c.NotAfter.Format(time.RFC3339))
	case !now.Before(c.NotAfter.Add(-renewBefore)):
		return fmt.Sprintf("expires at %s, within the renewal window of %s", c.NotAfter.Format(time.RFC3339), renewBefore)
	}
	return ""
}

// errNoCertificate reports a value without any PEM certificate.
var errNoCertificate = errors.New("no PEM certificate")

// parseFirst returns the first certificate of a PEM value: the leaf of a chain, the signing
// CA of a bundle.
func parseFirst(pemBytes []byte) (*x509.Certificate, error) {
	if len(pemBytes) == 0 {
		return nil, errNoCertificate
	}
	certs, err := certutil.ParseCertsPEM(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoCertificate, err)
	}
	return certs[0], nil
}

// matchKey checks that keyPEM is the private key of c.
func matchKey(c *x509.Certificate, keyPEM []byte) error {
	signer, err := parseSigner(keyPEM)
	if err != nil {
		return err
	}
	pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(signer.Public()) {
		return errors.New("the private key does not match the certificate")
	}
	return nil
}

// parseSigner parses a PEM private key (PKCS#8, SEC 1 or PKCS#1) that can sign.
func parseSigner(keyPEM []byte) (crypto.Signer, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", key)
	}
	return signer, nil
}

// chainsTo checks that the leaf of certPEM verifies against the CAs of bundlePEM at now.
func chainsTo(certPEM, bundlePEM []byte, now time.Time) error {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundlePEM) {
		return errors.New("the CA bundle holds no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err = certs[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// sameStrings compares two name lists as sets, ignoring case (DNS names are case-insensitive).
func sameStrings(a, b []string) bool {
	norm := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, s := range in {
			out = append(out, strings.ToLower(s))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

// ipStrings renders IPs canonically, so an IPv4 address compares equal in 4- and 16-byte form.
func ipStrings(ips []net.IP) []string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}
