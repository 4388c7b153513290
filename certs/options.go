package certs

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Mode says who issues the webhook serving certificate.
type Mode string

const (
	// ModeSelfManaged makes the operator its own CA: it creates, renews and injects the
	// certificate, so an install needs nothing besides the operator.
	ModeSelfManaged Mode = "self-managed"
	// ModeCertManager leaves issuing and CA injection to cert-manager (the chart's Certificate
	// and its cert-manager.io/inject-ca-from annotation); the operator only reads the Secret.
	ModeCertManager Mode = "cert-manager"
)

// MarshalText lets a Mode be a flag value (flag.TextVar).
func (m Mode) MarshalText() ([]byte, error) { return []byte(m), nil }

// UnmarshalText refuses unknown modes at flag parsing instead of at startup.
func (m *Mode) UnmarshalText(b []byte) error {
	switch v := Mode(b); v {
	case ModeSelfManaged, ModeCertManager:
		*m = v
		return nil
	default:
		return fmt.Errorf("%w: mode %q (want %q or %q)", ErrInvalidOptions, v, ModeSelfManaged, ModeCertManager)
	}
}

// Defaults for the self-managed lifetimes: a serving certificate lives 90 days and is renewed
// 30 days before it ends; the CA lives two years and is rotated with a third of it left.
const (
	DefaultCAValidity   = 2 * 365 * 24 * time.Hour
	DefaultCertValidity = 90 * 24 * time.Hour
	DefaultRenewBefore  = 30 * 24 * time.Hour
)

// ErrInvalidOptions reports a configuration that cannot work; New returns it wrapped.
var ErrInvalidOptions = errors.New("invalid webhook certificate options")

// Options configure the webhook serving certificate. Zero durations take the defaults.
type Options struct {
	// Mode chooses who issues the certificate.
	Mode Mode
	// Namespace and SecretName name the Secret (type kubernetes.io/tls) holding the certificate.
	Namespace, SecretName string
	// ServiceName is the webhook Service; the certificate is issued for
	// <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local (self-managed only).
	ServiceName string
	// ExtraDNSNames and ExtraIPs are added to the certificate, e.g. 127.0.0.1 when the API
	// server reaches an operator that runs out of cluster (self-managed only).
	ExtraDNSNames []string
	ExtraIPs      []net.IP
	// CertDir is the webhook server's certificate directory; every replica keeps tls.crt and
	// tls.key there equal to the Secret. Empty means the webhook server's own default.
	CertDir string
	// WebhookConfigurations are the ValidatingWebhookConfigurations whose caBundle the
	// self-managed issuer keeps equal to its CA bundle.
	WebhookConfigurations []string
	// MutatingWebhookConfigurations are the MutatingWebhookConfigurations treated the same way.
	MutatingWebhookConfigurations []string
	// CAValidity and CARenewBefore bound the self-managed CA; CARenewBefore defaults to a
	// third of CAValidity and must be at least CertValidity, so that a serving certificate
	// never outlives the CA that signed it.
	CAValidity, CARenewBefore time.Duration
	// CertValidity and RenewBefore bound the self-managed serving certificate.
	CertValidity, RenewBefore time.Duration
	// Log receives what the certificate machinery does; the zero value means the manager's logger.
	Log logr.Logger
}

// BindFlags registers the flags that only the certificate machinery reads. Namespace, CertDir
// and WebhookConfigurations come from the manager's own flags (--namespace,
// --webhook-cert-dir, --webhook-configuration-name), so main sets them after parsing.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.TextVar(&o.Mode, "webhook-cert-mode", ModeSelfManaged, "Who issues the webhook serving certificate: self-managed or cert-manager.")
	fs.StringVar(&o.SecretName, "webhook-cert-secret", "gitops-reverser-webhook-tls", "Name of the webhook certificate Secret.")
	fs.StringVar(&o.ServiceName, "webhook-service-name", "gitops-reverser-webhook", "Name of the webhook Service the self-managed certificate is issued for.")
	fs.Func("webhook-cert-extra-dns-names", "Comma-separated extra DNS names for the self-managed certificate.", appendList(&o.ExtraDNSNames))
	fs.Func("webhook-cert-extra-ips", "Comma-separated extra IP addresses for the self-managed certificate (e.g. 127.0.0.1 out of cluster).", appendIPs(&o.ExtraIPs))
	fs.DurationVar(&o.CAValidity, "webhook-ca-validity", DefaultCAValidity, "Lifetime of the self-managed CA.")
	fs.DurationVar(&o.CARenewBefore, "webhook-ca-renew-before", 0, "Rotate the self-managed CA this long before it expires (default: a third of its validity).")
	fs.DurationVar(&o.CertValidity, "webhook-cert-validity", DefaultCertValidity, "Lifetime of the self-managed serving certificate.")
	fs.DurationVar(&o.RenewBefore, "webhook-cert-renew-before", DefaultRenewBefore, "Renew the self-managed serving certificate this long before it expires.")
}

// appendList parses a comma-separated flag value, so the flag can be repeated or listed.
func appendList(dst *[]string) func(string) error {
	return func(s string) error {
		for _, v := range strings.Split(s, ",") {
			if v = strings.TrimSpace(v); v != "" {
				*dst = append(*dst, v)
			}
		}
		return nil
	}
}

// appendIPs parses a comma-separated list of IP addresses, refusing anything else.
func appendIPs(dst *[]net.IP) func(string) error {
	return func(s string) error {
		var names []string
		if err := appendList(&names)(s); err != nil {
			return err
		}
		for _, n := range names {
			ip := net.ParseIP(n)
			if ip == nil {
				return fmt.Errorf("%w: %q is not an IP address", ErrInvalidOptions, n)
			}
			*dst = append(*dst, ip)
		}
		return nil
	}
}

// withDefaults fills the zero durations and the directory, so that callers set only what
// they change.
func (o Options) withDefaults() Options {
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.CARenewBefore == 0 {
		o.CARenewBefore = o.CAValidity / 3
	}
	if o.CertValidity == 0 {
		o.CertValidity = DefaultCertValidity
	}
	if o.RenewBefore == 0 {
		o.RenewBefore = DefaultRenewBefore
	}
	if o.CertDir == "" { // controller-runtime's webhook.Options.CertDir default
		o.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	return o
}

// validate refuses options that could not produce a served certificate, naming the field.
func (o Options) validate() error {
	var problems []string
	add := func(cond bool, msg string) {
		if cond {
			problems = append(problems, msg)
		}
	}
	add(o.Mode != ModeSelfManaged && o.Mode != ModeCertManager, fmt.Sprintf("mode %q is neither %q nor %q", o.Mode, ModeSelfManaged, ModeCertManager))
	add(o.Namespace == "", "namespace is empty")
	add(o.SecretName == "", "secret name is empty")
	if o.Mode == ModeSelfManaged {
		add(o.ServiceName == "" && len(o.ExtraDNSNames) == 0 && len(o.ExtraIPs) == 0, "self-managed mode needs a service name or extra names")
		add(o.RenewBefore <= 0 || o.RenewBefore >= o.CertValidity, "renew-before must be positive and shorter than the certificate validity")
		add(o.CARenewBefore <= 0 || o.CARenewBefore >= o.CAValidity, "CA renew-before must be positive and shorter than the CA validity")
		add(o.CARenewBefore < o.CertValidity, "CA renew-before must be at least the certificate validity")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return nil
}

// names are the subject alternative names of the self-managed serving certificate.
func (o Options) names() Names {
	var dns []string
	if o.ServiceName != "" {
		base := o.ServiceName + "." + o.Namespace + ".svc"
		dns = append(dns, base, base+".cluster.local")
	}
	return Names{DNSNames: append(dns, o.ExtraDNSNames...), IPs: o.ExtraIPs}
}

// policy is the part of the options the pure decisions read.
func (o Options) policy() renewalPolicy {
	return renewalPolicy{
		Names:         o.names(),
		CAValidity:    o.CAValidity,
		CARenewBefore: o.CARenewBefore,
		CertValidity:  o.CertValidity,
		RenewBefore:   o.RenewBefore,
	}
}
