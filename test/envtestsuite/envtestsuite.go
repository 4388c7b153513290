// Package envtestsuite gives a test package its one shared control plane (a real
// kube-apiserver and etcd from `make envtest`), so each suite's TestMain says only what it
// runs on top of it.
package envtestsuite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitops-reverser/gitops-reverser/config"
)

// Main starts the control plane (with the operator's CRDs when withCRDs is set), calls
// setup, runs the tests, stops everything and exits with the tests' code. setup's cleanup,
// if any, runs before the control plane stops.
func Main(m *testing.M, withCRDs bool, setup func(cfg *rest.Config) (cleanup func(), err error)) {
	code, err := run(m, withCRDs, setup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M, withCRDs bool, setup func(cfg *rest.Config) (func(), error)) (int, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS is not set; run `make test`")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(LogOutput())))
	env := &envtest.Environment{}
	if withCRDs {
		crds, err := config.LoadCRDs()
		if err != nil {
			return 0, err
		}
		env.CRDInstallOptions = envtest.CRDInstallOptions{CRDs: crds}
	}
	cfg, err := Start(env)
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	cleanup, err := setup(cfg)
	if err != nil {
		return 0, err
	}
	if cleanup != nil {
		defer cleanup()
	}
	return m.Run(), nil
}

// LogOutput shows the operator's logs only when TEST_LOG is set.
func LogOutput() io.Writer {
	if os.Getenv("TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// Start starts env's own control plane, never the cluster a USE_EXISTING_CLUSTER in the
// caller's shell would point it to, and stops what it started when a later step of the
// start fails: envtest then leaves kube-apiserver and etcd running, in their own process
// group.
func Start(env *envtest.Environment) (*rest.Config, error) {
	env.UseExistingCluster = ptr.To(false)
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting the control plane: %w", err), env.Stop())
	}
	return cfg, nil
}
