// Package e2e drives the real gitops-reverser binary, out of cluster, against a real
// kube-apiserver and etcd (envtest), with kubectl, and checks the real Git remote with the
// git CLI as an independent observer.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gitops-reverser/gitops-reverser/config"
	"github.com/gitops-reverser/gitops-reverser/test/envtestsuite"
)

// suite is the one control plane and binary shared by the package's tests.
type suite struct {
	env        *envtest.Environment
	kubeconfig string
	// operatorKubeconfig authenticates the binary as its own user.
	operatorKubeconfig string
	binary             string
	dir                string
	certDir            string
	webhookPort        int
	// servers holds the server of each repository newRemote made, by its path; remotes
	// numbers them.
	servers sync.Map
	remotes atomic.Int64
}

var shared suite

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBEBUILDER_ASSETS is not set; run `make test`")
		return 1, nil
	}
	dir, err := os.MkdirTemp("", "gitops-reverser-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	shared.dir = dir

	shared.binary = filepath.Join(dir, "gitops-reverser")
	_, here, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", shared.binary, "./cmd/gitops-reverser")
	build.Dir = filepath.Join(filepath.Dir(here), "..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building the binary: %w", err)
	}

	crds, err := config.LoadCRDs()
	if err != nil {
		return 0, err
	}
	shared.env = &envtest.Environment{CRDInstallOptions: envtest.CRDInstallOptions{CRDs: crds}}
	// As OpenShift does by default: setting an ownerReference with blockOwnerDeletion needs
	// update on the owner's finalizers, which the operator's role must grant.
	apiServer := shared.env.ControlPlane.GetAPIServer().Configure()
	apiServer.Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	// PodTemplates are watched straight from etcd, which is compacted every second, so a
	// watch resumed after a few seconds' cut has lost its history and must re-list
	// (TestChangesMadeWhileTheWatchWasCutReachGitAfterTheRelist; no other test uses them).
	apiServer.Append("watch-cache-sizes", "podtemplates#0")
	apiServer.Set("etcd-compaction-interval", "1s")
	cfg, err := envtestsuite.Start(shared.env)
	if err != nil {
		return 0, err
	}
	defer func() { _ = shared.env.Stop() }()
	user, err := shared.env.ControlPlane.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return 0, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return 0, err
	}
	shared.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(shared.kubeconfig, kc, 0o600); err != nil {
		return 0, err
	}
	// The operator runs as its own user, as in a cluster (its writes skip the webhook),
	// with exactly the ClusterRole the project ships: a verb missing from it fails here.
	op, err := shared.env.ControlPlane.AddUser(envtest.User{Name: operatorUser}, nil)
	if err != nil {
		return 0, err
	}
	if kc, err = op.KubeConfig(); err != nil {
		return 0, err
	}
	shared.operatorKubeconfig = filepath.Join(dir, "operator.kubeconfig")
	if err := os.WriteFile(shared.operatorKubeconfig, kc, 0o600); err != nil {
		return 0, err
	}
	if err := setupWebhook(cfg); err != nil {
		return 0, err
	}
	if err := bindShippedRoles(cfg, filepath.Join(filepath.Dir(here), "..", "..", "config", "rbac", "role.yaml")); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// operatorUser is the user the binary authenticates as.
const operatorUser = "gitops-reverser"

// bindShippedRoles creates the ClusterRole and the Role (the leader election Lease, in the
// operator's namespace) of config/rbac/role.yaml and binds operatorUser to them.
func bindShippedRoles(cfg *rest.Config, rolePath string) error {
	data, err := os.ReadFile(rolePath)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: operatorUser}}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := sigsyaml.Unmarshal([]byte(doc), &meta); err != nil {
			return fmt.Errorf("reading %s: %w", rolePath, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			var role rbacv1.ClusterRole
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				return fmt.Errorf("reading %s: %w", rolePath, err)
			}
			if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
				return err
			}
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
			if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				return err
			}
		case "Role":
			var role rbacv1.Role
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				return fmt.Errorf("reading %s: %w", rolePath, err)
			}
			if _, err := cs.RbacV1().Roles(role.Namespace).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
				return err
			}
			binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
			if _, err := cs.RbacV1().RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected kind %q", rolePath, meta.Kind)
		}
	}
	return nil
}

func setupWebhook(cfg *rest.Config) error {
	shared.certDir = filepath.Join(shared.dir, "certs")
	if err := os.MkdirAll(shared.certDir, 0o700); err != nil {
		return err
	}
	var err error
	if shared.webhookPort, err = freePort(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The operator's namespace holds its self-managed certificate Secret.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	return installWebhookConfiguration(cs, shared.webhookPort)
}
