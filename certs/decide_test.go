package certs

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// t0 is a whole second, as certificate times are.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

var testNames = Names{
	DNSNames: []string{"hook.ops.svc", "hook.ops.svc.cluster.local"},
	IPs:      []net.IP{net.ParseIP("127.0.0.1")},
}

// testPolicy: CA 10h rotated with 2h left, certificates 1h renewed with 20m left (grace 1m).
var testPolicy = renewalPolicy{Names: testNames, CAValidity: 10 * time.Hour, CARenewBefore: 2 * time.Hour, CertValidity: time.Hour, RenewBefore: 20 * time.Minute}

type pair struct{ crt, key []byte }

func newTestCA(t *testing.T, at time.Time, validity time.Duration) pair {
	t.Helper()
	crt, key, err := NewCA(at, validity)
	require.NoError(t, err)
	return pair{crt, key}
}

func issueTest(t *testing.T, ca pair, names Names, at time.Time, validity time.Duration) pair {
	t.Helper()
	crt, key, err := Issue(ca.crt, ca.key, names, at, validity)
	require.NoError(t, err)
	return pair{crt, key}
}

func secretOf(bundle []byte, ca, leaf pair) map[string][]byte {
	return map[string][]byte{keyCACert: bundle, keyCAKey: ca.key, corev1.TLSCertKey: leaf.crt, corev1.TLSPrivateKeyKey: leaf.key}
}

func concat(pems ...[]byte) []byte {
	var out []byte
	for _, p := range pems {
		out = append(out, p...)
	}
	return out
}

func TestNeedsRenewal(t *testing.T) {
	ca := newTestCA(t, t0, 10*time.Hour)
	leaf := issueTest(t, ca, testNames, t0, time.Hour)
	tests := []struct {
		name      string
		cert      []byte
		now       time.Time
		want      Names
		renew     bool
		reasonHas string
	}{
		{name: "a fresh certificate with the wanted names is kept", cert: leaf.crt, now: t0.Add(time.Minute), want: testNames},
		{name: "a certificate inside its renewal window is renewed", cert: leaf.crt, now: t0.Add(45 * time.Minute), want: testNames, renew: true, reasonHas: "renewal window"},
		{name: "an expired certificate is renewed", cert: leaf.crt, now: t0.Add(2 * time.Hour), want: testNames, renew: true, reasonHas: "expired"},
		{name: "a certificate not valid yet is renewed", cert: leaf.crt, now: t0.Add(-2 * time.Hour), want: testNames, renew: true, reasonHas: "not valid before"},
		{
			name: "a certificate missing a wanted DNS name is renewed", cert: leaf.crt, now: t0.Add(time.Minute),
			want: Names{DNSNames: append([]string{"extra.example"}, testNames.DNSNames...), IPs: testNames.IPs}, renew: true, reasonHas: "DNS names",
		},
		{
			name: "a certificate with a DNS name no longer wanted is renewed", cert: leaf.crt, now: t0.Add(time.Minute),
			want: Names{DNSNames: testNames.DNSNames[:1], IPs: testNames.IPs}, renew: true, reasonHas: "DNS names",
		},
		{
			name: "a certificate without the wanted IP address is renewed", cert: leaf.crt, now: t0.Add(time.Minute),
			want: Names{DNSNames: testNames.DNSNames, IPs: []net.IP{net.ParseIP("10.0.0.1")}}, renew: true, reasonHas: "IP addresses",
		},
		{
			name: "names match regardless of order, case and IPv4 form", cert: leaf.crt, now: t0.Add(time.Minute),
			want: Names{DNSNames: []string{"HOOK.ops.svc.cluster.local", "hook.ops.svc"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1).To16()}},
		},
		{name: "garbage PEM is renewed", cert: []byte("not a certificate"), now: t0, want: testNames, renew: true, reasonHas: "no PEM certificate"},
		{name: "a PEM key in place of the certificate is renewed", cert: leaf.key, now: t0, want: testNames, renew: true, reasonHas: "no PEM certificate"},
		{name: "an empty value is renewed", cert: nil, now: t0, want: testNames, renew: true, reasonHas: "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			renew, reason := NeedsRenewal(tt.cert, tt.now, 20*time.Minute, tt.want)
			assert.Equal(t, tt.renew, renew, reason)
			assert.Contains(t, reason, tt.reasonHas)
		})
	}
}

func TestCANeedsRenewal(t *testing.T) {
	ca := newTestCA(t, t0, 10*time.Hour)
	other := newTestCA(t, t0, 10*time.Hour)
	leaf := issueTest(t, ca, testNames, t0, time.Hour)
	tests := []struct {
		name      string
		bundle    []byte
		key       []byte
		now       time.Time
		renew     bool
		reasonHas string
	}{
		{name: "a fresh CA with its key is kept", bundle: ca.crt, key: ca.key, now: t0.Add(time.Hour)},
		{name: "only the first CA of the bundle is the signer", bundle: concat(ca.crt, other.crt), key: ca.key, now: t0.Add(time.Hour)},
		{name: "a CA inside its renewal window is rotated", bundle: ca.crt, key: ca.key, now: t0.Add(9 * time.Hour), renew: true, reasonHas: "renewal window"},
		{name: "an expired CA is rotated", bundle: ca.crt, key: ca.key, now: t0.Add(11 * time.Hour), renew: true, reasonHas: "expired"},
		{name: "a CA whose key does not match is rotated", bundle: ca.crt, key: other.key, now: t0.Add(time.Hour), renew: true, reasonHas: "does not match"},
		{name: "a CA without its key is rotated", bundle: ca.crt, key: nil, now: t0.Add(time.Hour), renew: true, reasonHas: "private key"},
		{name: "a serving certificate in place of the CA is rotated", bundle: leaf.crt, key: leaf.key, now: t0.Add(time.Minute), renew: true, reasonHas: "not a CA"},
		{name: "a missing bundle is created", bundle: nil, key: nil, now: t0, renew: true, reasonHas: "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			renew, reason := CANeedsRenewal(tt.bundle, tt.key, tt.now, 2*time.Hour)
			assert.Equal(t, tt.renew, renew, reason)
			assert.Contains(t, reason, tt.reasonHas)
		})
	}
}

func TestDecide(t *testing.T) {
	ca := newTestCA(t, t0, 10*time.Hour)
	leaf := issueTest(t, ca, testNames, t0, time.Hour)
	otherLeaf := issueTest(t, ca, testNames, t0, time.Hour)
	stranger := issueTest(t, newTestCA(t, t0, 10*time.Hour), testNames, t0, time.Hour)
	lateLeaf := issueTest(t, ca, testNames, t0.Add(8*time.Hour+20*time.Minute), time.Hour)
	// A CA created 30 s before the renewal below, with the old one still in the bundle.
	young := newTestCA(t, t0.Add(44*time.Minute+30*time.Second), 10*time.Hour)
	rotated := concat(young.crt, ca.crt)
	// A CA created 20 s before its certificate's last 10 s (a leader starting after downtime
	// found the CA's key lost).
	late := newTestCA(t, t0.Add(59*time.Minute+30*time.Second), 10*time.Hour)

	tests := []struct {
		name  string
		data  map[string][]byte
		now   time.Time
		want  step
		inWhy string
	}{
		{
			name: "an empty Secret gets a CA and a certificate",
			data: nil, now: t0,
			want: step{NewCA: true, NewCert: true}, inWhy: "CA",
		},
		{
			name: "a fresh Secret needs nothing until the certificate's renewal window",
			data: secretOf(ca.crt, ca, leaf), now: t0.Add(time.Minute),
			want: step{RecheckAfter: 39 * time.Minute},
		},
		{
			name: "a certificate in its renewal window is reissued when its CA is old enough",
			data: secretOf(ca.crt, ca, leaf), now: t0.Add(45 * time.Minute),
			want: step{NewCert: true}, inWhy: "renewal window",
		},
		{
			name: "a renewal waits while its CA is younger than the propagation grace",
			data: secretOf(rotated, young, leaf), now: t0.Add(45 * time.Minute),
			want: step{RecheckAfter: 30 * time.Second}, inWhy: "waiting for the new CA",
		},
		{
			name: "a renewal waiting for a young CA comes back when the certificate expires, if that is sooner",
			data: secretOf(concat(late.crt, ca.crt), late, leaf), now: t0.Add(59*time.Minute + 50*time.Second),
			want: step{RecheckAfter: 10 * time.Second}, inWhy: "waiting for the new CA",
		},
		{
			name: "a certificate whose key does not match is reissued at once, even with a young CA",
			data: secretOf(rotated, young, pair{leaf.crt, otherLeaf.key}), now: t0.Add(45 * time.Minute),
			want: step{NewCert: true}, inWhy: "renewal window",
		},
		{
			name: "an expired certificate is reissued at once, even with a young CA",
			data: secretOf(rotated, young, leaf), now: t0.Add(61 * time.Minute),
			want: step{NewCert: true}, inWhy: "expired",
		},
		{
			name: "a certificate signed by a CA outside the bundle is reissued",
			data: secretOf(ca.crt, ca, stranger), now: t0.Add(time.Minute),
			want: step{NewCert: true}, inWhy: "unknown authority",
		},
		{
			name: "an expiring CA is rotated and the still-valid certificate kept",
			data: secretOf(ca.crt, ca, lateLeaf), now: t0.Add(8*time.Hour + 30*time.Minute),
			want: step{NewCA: true}, inWhy: "CA: expires",
		},
		{
			name: "an expiring CA whose certificate cannot serve gets both",
			data: secretOf(ca.crt, ca, leaf), now: t0.Add(8*time.Hour + 30*time.Minute),
			want: step{NewCA: true, NewCert: true}, inWhy: "CA: expires",
		},
		{
			name: "a CA whose key was lost is rotated and the certificate kept",
			data: secretOf(ca.crt, pair{}, leaf), now: t0.Add(time.Minute),
			want: step{NewCA: true}, inWhy: "private key",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testPolicy.decide(tt.data, tt.now)
			assert.Contains(t, got.Reason, tt.inWhy)
			got.Reason = ""
			assert.Equal(t, tt.want, got)
		})
	}
}
