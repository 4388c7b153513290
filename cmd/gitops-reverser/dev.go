package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/config"
)

// devOptions are the flags of `gitops-reverser dev`.
type devOptions struct {
	keepRunning bool
	dir         string
	verbose     bool
}

// runDev is the sandbox behind `make demo`: a local control plane (envtest assets), a bare
// Git repository, the operator in-process, a sample change, and the resulting commits.
func runDev(args []string) error {
	o, err := parseDevArgs(args)
	if err != nil {
		return err
	}
	logOut := io.Discard
	if o.verbose {
		logOut = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logOut)))
	created, err := sandboxDir(&o)
	if err != nil {
		return err
	}
	crds, err := config.LoadCRDs()
	if err != nil {
		return err
	}
	// Its own control plane, never one USE_EXISTING_CLUSTER in the shell points to.
	env := &envtest.Environment{CRDInstallOptions: envtest.CRDInstallOptions{CRDs: crds}, UseExistingCluster: ptr.To(false)}
	ctx, stop := interrupted(func() {
		_ = env.Stop()
		fmt.Fprintf(os.Stderr, "kube-apiserver and etcd stopped; the sandbox is left in %s\n", o.dir)
		os.Exit(130)
	})
	defer stop()
	err = devSandbox(ctx, o, env)
	if ctx.Err() != nil {
		err = errors.New("interrupted: the operator, kube-apiserver and etcd are stopped") // not the context's error
	}
	if created && !o.keepRunning && (err == nil || ctx.Err() != nil) {
		// Its repository, clones and the webhook's CA key are of no use after the demo, or
		// once it is interrupted.
		return errors.Join(err, os.RemoveAll(o.dir))
	}
	fmt.Fprintf(os.Stderr, "the sandbox (Git repository, clones, certificates) is kept in %s\n", o.dir)
	if err != nil && ctx.Err() == nil && !o.verbose {
		fmt.Fprintln(os.Stderr, "to see the operator's logs, run `make demo DEMO_VERBOSE=1`")
	}
	return err
}

// parseDevArgs reads dev's flags; it needs KUBEBUILDER_ASSETS, which `make demo` sets.
func parseDevArgs(args []string) (devOptions, error) {
	var o devOptions
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.BoolVar(&o.keepRunning, "keep-running", false, "Keep the sandbox running after the demo and print the KUBECONFIG to use.")
	fs.StringVar(&o.dir, "dir", "", "Directory for the sandbox (default: a new temporary directory).")
	fs.BoolVar(&o.verbose, "v", false, "Show the operator's logs.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return o, errors.New("KUBEBUILDER_ASSETS is not set: run `make demo`, which builds kube-apiserver and etcd once and sets it")
	}
	return o, nil
}

// sandboxDir makes o.dir absolute, or a new temporary directory when none was given
// (created): the GitProvider's file:// URL needs an absolute path, since
// file://sandbox/remote.git names a host.
func sandboxDir(o *devOptions) (created bool, err error) {
	if o.dir != "" {
		abs, err := filepath.Abs(o.dir)
		if err != nil {
			return false, fmt.Errorf("--dir %s: %w", o.dir, err)
		}
		o.dir = abs
		return false, nil
	}
	d, err := os.MkdirTemp("", "gitops-reverser-dev-")
	if err != nil {
		return false, err
	}
	o.dir = d
	return true, nil
}

// interrupted returns a context the first SIGINT, SIGTERM or SIGHUP cancels, which starts
// the orderly teardown (the operator, then the control plane: up to a minute), and says so;
// a second one calls hurry, which skips the operator's shutdown and must not return. kube-apiserver and etcd run in their own
// process group, so a terminal's Ctrl-C never reaches them: only the teardown or hurry stops
// them. stop ends the watch.
func interrupted(hurry func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-signals:
			fmt.Fprintf(os.Stderr, "\n%v: stopping the operator and the control plane (again to skip the operator's shutdown)\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case <-signals:
			hurry()
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(done)
		cancel()
	}
}

// devSandbox starts the control plane, a bare repository and the operator, runs the demo's
// steps (devScenario), and stops them all again, whatever happened.
func devSandbox(ctx context.Context, o devOptions, env *envtest.Environment) (err error) {
	step("starting a local control plane (kube-apiserver + etcd)")
	cfg, err := env.Start()
	if err != nil {
		// A step after the processes started can fail (the CRDs, the default namespace):
		// envtest leaves them running then.
		return errors.Join(fmt.Errorf("starting the control plane: %w", err), env.Stop())
	}
	defer func() { err = errors.Join(err, env.Stop()) }()

	remote := filepath.Join(o.dir, "remote.git")
	step("creating a bare Git repository at " + remote)
	if _, err := git.PlainInit(remote, true); err != nil {
		return fmt.Errorf("creating %s: %w", remote, err)
	}

	scheme, err := newScheme()
	if err != nil {
		return err
	}
	warnings := &warningRecorder{}
	userCfg := rest.CopyConfig(cfg)
	userCfg.WarningHandler = warnings
	c, err := client.New(userCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	opCfg, opts, err := devOperator(ctx, env, c, o.dir)
	if err != nil {
		return err
	}
	step("running the operator (its admission webhook on " + opts.WebhookHost + ":" + strconv.Itoa(opts.WebhookPort) + ", self-managed certificate)")
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	// The demo's waits end as soon as the operator does, whose error then says why.
	ctx, operatorStopped := context.WithCancel(ctx)
	go func() {
		done <- run(mctx, opCfg, opts)
		operatorStopped()
	}()
	defer func() {
		cancel()
		err = errors.Join(err, <-done)
	}()
	if err := devScenario(ctx, c, warnings, remote); err != nil {
		return err
	}
	if o.keepRunning {
		return keepSandbox(ctx, env, o.dir, remote)
	}
	return nil
}

// devScenario runs the demo's steps against the running operator: its objects, a change
// and the commit it makes, a denial, and a Secret that lands encrypted.
func devScenario(ctx context.Context, c client.Client, warnings *warningRecorder, remote string) error {
	if err := waitCABundle(ctx, c); err != nil {
		return err
	}
	if err := devApply(ctx, c, remote); err != nil {
		return err
	}
	if err := waitWatchedRules(ctx, c); err != nil {
		return err
	}
	if err := devChange(ctx, c, remote); err != nil {
		return err
	}
	if err := devAdmission(ctx, c, warnings); err != nil {
		return err
	}
	return devEncryption(ctx, c, remote)
}

// keepSandbox says how to use the sandbox from another shell and waits until ctx ends
// (Ctrl-C).
func keepSandbox(ctx context.Context, env *envtest.Environment, dir, remote string) error {
	kc, err := writeKubeconfig(env, dir)
	if err != nil {
		return err
	}
	fmt.Printf("\nThe sandbox keeps running. In another shell:\n\n  export KUBECONFIG=%s\n  kubectl -n demo edit configmap app-config\n  kubectl -n demo create secret generic api-key --from-literal=token=x --dry-run=server   # allowed: lands encrypted\n  git --git-dir %s log --stat\n\nPress Ctrl-C to stop.\n", kc, remote)
	<-ctx.Done()
	return nil
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

// devApply creates the demo namespace and the operator's objects, and waits until Ready.
func devApply(ctx context.Context, c client.Client, remote string) error {
	step("applying GitProvider, GitTarget and WatchRule for namespace demo")
	quiet := metav1.Duration{Duration: time.Second}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		&v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "local"},
			Spec: v1alpha1.GitProviderSpec{URL: "file://" + remote, AllowedBranches: []string{"main"}}},
		&v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "live"},
			Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "local"}, Branch: "main", Path: "live",
				CommitWindow: v1alpha1.CommitWindow{Quiet: &quiet}}},
		&v1alpha1.WatchRule{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "config"},
			Spec: v1alpha1.WatchRuleSpec{TargetRef: v1alpha1.LocalObjectReference{Name: "live"},
				Rules: []v1alpha1.ResourceRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}}}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	for _, o := range objs[1:] {
		if err := waitReady(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

func waitReady(ctx context.Context, c client.Client, o client.Object) error {
	key := client.ObjectKeyFromObject(o)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, key, o); err != nil {
			return err
		}
		if conds := conditionsOf(o); conds != nil && apimeta.IsStatusConditionTrue(*conds, v1alpha1.ConditionReady) {
			fmt.Printf("    %T %s is Ready\n", o, key)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	conds := conditionsOf(o)
	return fmt.Errorf("%T %s not Ready after 60s: %v", o, key, *conds)
}

func conditionsOf(o client.Object) *[]metav1.Condition {
	switch t := o.(type) {
	case *v1alpha1.GitProvider:
		return &t.Status.Conditions
	case *v1alpha1.GitTarget:
		return &t.Status.Conditions
	case *v1alpha1.WatchRule:
		return &t.Status.Conditions
	}
	return nil
}

// devChange creates then edits a ConfigMap and prints what reached the remote.
func devChange(ctx context.Context, c client.Client, remote string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app-config", Labels: map[string]string{"app": "demo"}},
		Data: map[string]string{"greeting": "hello", "replicas": "1"}}
	step("creating ConfigMap demo/app-config")
	if err := c.Create(ctx, cm); err != nil {
		return err
	}
	first, err := waitForCommit(ctx, remote, plumbing.ZeroHash)
	if err != nil {
		return err
	}
	step("editing ConfigMap demo/app-config (greeting: hello -> hello, Git)")
	if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "app-config"}, cm); err != nil {
		return err
	}
	cm.Data["greeting"] = "hello, Git"
	if err := c.Update(ctx, cm); err != nil {
		return err
	}
	if _, err := waitForCommit(ctx, remote, first); err != nil {
		return err
	}
	return printRemote(remote, "live/demo/configmaps/app-config.yaml")
}

// waitForCommit waits until the remote's main branch moves past `after`.
func waitForCommit(ctx context.Context, remote string, after plumbing.Hash) (plumbing.Hash, error) {
	r, err := git.PlainOpen(remote)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if ref, err := r.Reference(plumbing.NewBranchReferenceName("main"), true); err == nil && ref.Hash() != after {
			return ref.Hash(), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		return plumbing.ZeroHash, ctx.Err() // stopped, or the operator did (its error says why)
	}
	return plumbing.ZeroHash, fmt.Errorf("no new commit on main in %s within 60s", remote)
}

// printRemote shows `git log --stat` of main and the file's content, read with go-git.
func printRemote(remote, file string) error {
	r, err := git.PlainOpen(remote)
	if err != nil {
		return err
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return err
	}
	step("git log --stat (remote " + remote + ", branch main)")
	iter, err := r.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return err
	}
	err = iter.ForEach(func(cm *object.Commit) error {
		fmt.Printf("\ncommit %s\nAuthor: %s <%s>\nDate:   %s\n\n    %s\n\n", cm.Hash, cm.Author.Name, cm.Author.Email,
			cm.Author.When.Format(time.RFC1123Z), strings.ReplaceAll(strings.TrimSpace(cm.Message), "\n", "\n    "))
		stats, err := cm.Stats()
		if err != nil {
			return err
		}
		for _, s := range stats {
			fmt.Printf(" %s | +%d -%d\n", s.Name, s.Addition, s.Deletion)
		}
		return nil
	})
	if err != nil {
		return err
	}
	head, err := r.CommitObject(ref.Hash())
	if err != nil {
		return err
	}
	f, err := head.File(file)
	if err != nil {
		return fmt.Errorf("reading %s at %s: %w", file, ref.Hash(), err)
	}
	content, err := f.Contents()
	if err != nil {
		return err
	}
	step(file)
	fmt.Print(content)
	return nil
}

// writeKubeconfig writes an admin kubeconfig for the sandbox's control plane.
func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}
