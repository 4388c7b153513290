package certs

import (
	"flag"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	valid := Options{Mode: ModeSelfManaged, Namespace: "ops", SecretName: "hook-tls", ServiceName: "hook", CertDir: "/tmp/certs"}
	tests := []struct {
		name    string
		change  func(*Options)
		problem string
	}{
		{name: "self-managed options with a service and default lifetimes are accepted", change: func(*Options) {}},
		{name: "cert-manager mode needs no service", change: func(o *Options) { o.Mode, o.ServiceName = ModeCertManager, "" }},
		{name: "an unknown mode is refused", change: func(o *Options) { o.Mode = "vault" }, problem: `mode "vault"`},
		{name: "a Secret must be named", change: func(o *Options) { o.SecretName = "" }, problem: "secret name is empty"},
		{name: "a namespace is needed", change: func(o *Options) { o.Namespace = "" }, problem: "namespace is empty"},
		{name: "the certificate directory defaults to the webhook server's", change: func(o *Options) { o.CertDir = "" }},
		{name: "self-managed mode needs some name to issue for", change: func(o *Options) { o.ServiceName = "" }, problem: "service name or extra names"},
		{name: "renewing before the whole validity is refused", change: func(o *Options) { o.CertValidity, o.RenewBefore = time.Hour, time.Hour }, problem: "renew-before must be"},
		{
			name: "a CA rotated later than a certificate could live is refused",
			change: func(o *Options) {
				o.CAValidity, o.CARenewBefore, o.CertValidity, o.RenewBefore = 10*time.Hour, time.Hour, 2*time.Hour, time.Hour
			},
			problem: "at least the certificate validity",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			_, err := New(o)
			if tt.problem == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrInvalidOptions)
			assert.ErrorContains(t, err, tt.problem)
		})
	}
}

func TestOptionsNames(t *testing.T) {
	o := Options{Namespace: "ops", ServiceName: "hook", ExtraDNSNames: []string{"hook.example"}, ExtraIPs: []net.IP{net.ParseIP("127.0.0.1")}}
	assert.Equal(t, Names{
		DNSNames: []string{"hook.ops.svc", "hook.ops.svc.cluster.local", "hook.example"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1")},
	}, o.names())
}

func TestBindFlags(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	require.NoError(t, fs.Parse([]string{
		"--webhook-cert-mode=cert-manager", "--webhook-cert-secret=hook-tls",
		"--webhook-cert-extra-ips=127.0.0.1, ::1", "--webhook-cert-extra-dns-names=a.example,b.example", "--webhook-cert-extra-dns-names=c.example",
		"--webhook-cert-validity=2h",
	}))
	assert.Equal(t, ModeCertManager, o.Mode)
	assert.Equal(t, "hook-tls", o.SecretName)
	assert.Equal(t, []string{"a.example", "b.example", "c.example"}, o.ExtraDNSNames)
	assert.Equal(t, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, o.ExtraIPs)
	assert.Equal(t, 2*time.Hour, o.CertValidity)
	assert.Equal(t, DefaultRenewBefore, o.RenewBefore)

	assert.Error(t, fs.Parse([]string{"--webhook-cert-mode=vault"}), "an unknown mode fails at parsing")
	assert.Error(t, fs.Parse([]string{"--webhook-cert-extra-ips=localhost"}), "a host name is not an IP address")
}
