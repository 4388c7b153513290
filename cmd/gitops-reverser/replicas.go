package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderElectionID names the Lease the replicas elect their leader with.
const leaderElectionID = "gitops-reverser.reverser.gitops.dev"

// advertiseAddress is where other replicas reach this one's webhook server: the flag, else
// $POD_IP with the webhook port, else none (records are then never forwarded).
func (o *Options) advertiseAddress() string {
	if o.AdvertiseAddress != "" {
		return o.AdvertiseAddress
	}
	if ip := os.Getenv("POD_IP"); ip != "" && o.WebhookPort != 0 {
		return net.JoinHostPort(ip, strconv.Itoa(o.WebhookPort))
	}
	return ""
}

// leaseLock is controller-runtime's Lease lock with an identity that carries the advertise
// address, so a non-leader finds where to forward attribution records in the Lease itself.
func leaseLock(cfg *rest.Config, namespace, identity string) (resourcelock.Interface, error) {
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election"))
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, namespace, leaderElectionID,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
}

// uniqueIdentity is the hostname plus a random suffix, as controller-runtime's default.
func uniqueIdentity() string {
	host, err := os.Hostname()
	if err != nil {
		host = "gitops-reverser"
	}
	return host + "_" + string(uuid.NewUUID())
}

// servingCertDir is the directory the webhook server reads its key pair from.
func servingCertDir(o Options) string {
	if o.WebhookCertDir != "" {
		return o.WebhookCertDir
	}
	return filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
}

// cachedKeyPair is the replicas' shared key pair, read from tls.crt/tls.key in dir (every
// replica keeps the files equal to the shared Secret, so they are what proves a peer is a
// replica), accepting the key before a renewal for keyPairGrace after it.
func cachedKeyPair(dir string) *replica.Rotating {
	return &replica.Rotating{Grace: keyPairGrace, Load: func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("loading the serving key pair from %s: %w", dir, err)
		}
		return &c, nil
	}}
}

// keyPairGrace is how long after a renewed certificate's NotBefore a replica still accepts
// the key before it: a webhook server presents a certificate up to 10 s after its files
// change (certwatcher), and self-managed certificates are backdated a minute.
const keyPairGrace = 3 * time.Minute
