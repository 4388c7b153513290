package controller_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/controller"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo/repotest"
)

// nonName matches what a namespace name cannot hold.
var nonName = regexp.MustCompile(`[^a-z0-9]+`)

func namespace(t *testing.T) string {
	t.Helper()
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 60 {
		name = strings.Trim(name[:60], "-")
	}
	require.NoError(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

func provider(ns, url string, branches ...string) *v1alpha1.GitProvider {
	return &v1alpha1.GitProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
		Spec: v1alpha1.GitProviderSpec{URL: url, AllowedBranches: branches}}
}

func target(ns, branch, path string) *v1alpha1.GitTarget {
	return &v1alpha1.GitTarget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"},
		Spec: v1alpha1.GitTargetSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "repo"}, Branch: branch, Path: path}}
}

// waitCondition waits until the object's condition has the status and returns its message.
func waitCondition(t *testing.T, obj client.Object, conds func() []metav1.Condition, typ string, status metav1.ConditionStatus) string {
	t.Helper()
	return waitConditionSaying(t, obj, conds, typ, status, "")
}

// waitConditionSaying is waitCondition for a message that contains saying: a reconcile that
// ran before the controller's cache held everything the test created (a Secret) reports
// another reason first, and the watch on it brings the final one.
func waitConditionSaying(t *testing.T, obj client.Object, conds func() []metav1.Condition, typ string, status metav1.ConditionStatus, saying string) string {
	t.Helper()
	var last []metav1.Condition
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
		last = conds()
		if c := apimeta.FindStatusCondition(last, typ); c != nil && c.Status == status && strings.Contains(c.Message, saying) {
			return c.Message
		}
	}
	t.Fatalf("condition %s=%s saying %q not reached; conditions: %+v", typ, status, saying, last)
	return ""
}

func bareRemote(t *testing.T) string {
	t.Helper()
	return strings.TrimPrefix(repotest.NewFileRemote(t).URL, "file://")
}

// sshKey makes a throwaway ed25519 private key in OpenSSH PEM form.
func sshKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	return pem.EncodeToMemory(block)
}

func TestKeptOutOfGit(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	other := ns + "-elsewhere" // need not exist: nothing is there
	p := provider(ns, "file://"+bareRemote(t))
	p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "git-auth"}
	require.NoError(t, k8s.Create(ctx, p))
	named := func(ns, name string) bool {
		ok, err := controller.KeptOutOfGit(ctx, managerCache, types.NamespacedName{Namespace: ns, Name: name})
		require.NoError(t, err)
		return ok
	}
	eventually(t, func() bool { return named(ns, "git-auth") })
	assert.False(t, named(ns, "db"), "a Secret no provider names")
	assert.False(t, named(other, "git-auth"), "the same name in another namespace")

	plain := target(ns, "main", "docs")
	plain.Name = "docs"
	require.NoError(t, k8s.Create(ctx, plain))
	encrypting := target(ns, "main", "live")
	encrypting.Spec.Encryption = &v1alpha1.Encryption{Age: &v1alpha1.AgeEncryption{
		SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}, GenerateWhenMissing: true}}
	require.NoError(t, k8s.Create(ctx, encrypting))
	eventually(t, func() bool { return named(ns, "sops-age") })
	assert.True(t, named(ns, "live"+controller.DigestSecretSuffix), "a GitTarget's digest key")
	assert.False(t, named(ns, "docs"+controller.DigestSecretSuffix), "a target without encryption keeps none")
	assert.False(t, named(ns, controller.DigestSecretSuffix), "a name that is the suffix alone names no target")
}

func TestGitProviderURLValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := []struct{ name, url, want string }{
		{"rejects a token in the query, which go-git cannot fetch with", "https://git.example.com/repo.git?private_token=QU3RY", "url must not carry a query"},
		{"rejects a URL whose password is not escaped", "https://bot:PASS^W0RD@git.example.com/repo.git", "url does not parse"},
		{"rejects a token whose slash is not escaped", "https://SL/ASH@git.example.com/repo.git", "url has an '@' after its host"},
		{"rejects a fragment", "https://git.example.com/repo.git#FRAG", "url must not carry a query or fragment"},
		{"rejects an address without a scheme, saying which forms are taken", "github.com/org/repo.git", "url must start with https://, http://, ssh:// or file://, or be an scp-like address"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := provider(ns, tc.url)
			p.Name = fmt.Sprintf("repo-%d", i)
			err := k8s.Create(ctx, p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("accepts an escaped password, an ssh URL, an scp-like address and a local path holding an @", func(t *testing.T) {
		for i, u := range []string{"https://bot:PASS%5EW0RD@git.example.com/repo.git", "https://SL%2FASH@git.example.com/repo.git",
			"ssh://git@git.example.com:2222/org/repo.git", "git@git.example.com:org/repo.git", "file:///srv/git/team@x/repo.git"} {
			p := provider(ns, u)
			p.Name = fmt.Sprintf("ok-%d", i)
			require.NoError(t, k8s.Create(ctx, p), u)
		}
	})
}

func TestGitProvider(t *testing.T) {
	ctx := context.Background()
	t.Run("is Ready when an empty local repository is reachable", func(t *testing.T) {
		ns := namespace(t)
		p := provider(ns, "file://"+bareRemote(t))
		require.NoError(t, k8s.Create(ctx, p))
		msg := waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		assert.Contains(t, msg, "reachable")
		assert.Equal(t, []string{"*"}, p.Spec.AllowedBranches, "allowedBranches defaults to every branch")
	})
	t.Run("is Stalled naming the Secret when it is missing", func(t *testing.T) {
		ns := namespace(t)
		p := provider(ns, "https://127.0.0.1:1/none.git")
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "creds"}
		require.NoError(t, k8s.Create(ctx, p))
		msg := waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, ns+"/creds not found")
	})
	t.Run("fails closed for SSH without known_hosts", func(t *testing.T) {
		ns := namespace(t)
		require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ssh"},
			Data: map[string][]byte{"identity": sshKey(t)}}))
		p := provider(ns, "ssh://git@127.0.0.1:1/repo.git")
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "ssh"}
		require.NoError(t, k8s.Create(ctx, p))
		msg := waitConditionSaying(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, "known_hosts")
		assert.NotContains(t, msg, "PRIVATE KEY")
	})
	t.Run("is Stalled saying what to set for SSH without a secretRef, which has no anonymous access", func(t *testing.T) {
		ns := namespace(t)
		p := provider(ns, "ssh://git@127.0.0.1:1/repo.git")
		require.NoError(t, k8s.Create(ctx, p))
		msg := waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "needs spec.secretRef")
		assert.Contains(t, msg, "known_hosts")
	})
	t.Run("authenticates over HTTP with basic auth from the Secret", func(t *testing.T) {
		ns := namespace(t)
		srv := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
		require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "http"},
			Data: map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")}}))
		p := provider(ns, srv.URL)
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "http"}
		require.NoError(t, k8s.Create(ctx, p))
		waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	})
	t.Run("is Stalled when the server refuses the Secret's credentials, never quoting them", func(t *testing.T) {
		ns := namespace(t)
		srv := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
		require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "http"},
			Data: map[string][]byte{"username": []byte("alice"), "password": []byte("revoked-token")}}))
		p := provider(ns, srv.URL)
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "http"}
		require.NoError(t, k8s.Create(ctx, p))
		msg := waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		requireStalled(t, p.Status.Conditions, v1alpha1.ReasonAccessDenied)
		assert.Contains(t, msg, "check the GitProvider's Secret")
		assert.NotContains(t, msg, "revoked-token")
	})
	t.Run("is Stalled when the SSH server shows a host key other than known_hosts holds", func(t *testing.T) {
		ns := namespace(t)
		remote := repotest.NewSSHRemote(t)
		impostor := repotest.NewSSHRemote(t) // its host key, listed for this server's address
		addr := strings.TrimSuffix(strings.TrimPrefix(remote.URL, "ssh://git@"), "/repo.git")
		knownHosts := knownhosts.Line([]string{knownhosts.Normalize(addr)}, impostor.HostKey) + "\n"
		require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ssh"},
			Data: map[string][]byte{"identity": remote.IdentityPEM, "known_hosts": []byte(knownHosts)}}))
		p := provider(ns, remote.URL)
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "ssh"}
		require.NoError(t, k8s.Create(ctx, p))
		waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		requireStalled(t, p.Status.Conditions, v1alpha1.ReasonAccessDenied)
	})
	t.Run("never repeats credentials a URL carries in its conditions", func(t *testing.T) {
		ns := namespace(t)
		srv := repotest.NewHTTPRemote(t, repotest.WithBasicAuth("alice", "s3cret"))
		u, err := url.Parse(srv.URL)
		require.NoError(t, err)
		u.User = url.UserPassword("alice", "s3cret")
		p := provider(ns, u.String())
		require.NoError(t, k8s.Create(ctx, p))
		msg := waitCondition(t, p, func() []metav1.Condition { return p.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		assert.Contains(t, msg, u.Host)
		assert.NotContains(t, msg, "s3cret")
		assert.NotContains(t, msg, "alice")
		assert.Equal(t, srv.URL, p.Status.URL, "what kubectl's URL column shows")
	})
}

func TestGitTarget(t *testing.T) {
	ctx := context.Background()
	t.Run("is Stalled when its GitProvider does not exist", func(t *testing.T) {
		ns := namespace(t)
		gt := target(ns, "main", "live")
		require.NoError(t, k8s.Create(ctx, gt))
		msg := waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, "GitProvider "+ns+"/repo not found")
	})
	t.Run("is Stalled when its folder overlaps an older target's on the same repository and branch", func(t *testing.T) {
		ns := namespace(t)
		require.NoError(t, k8s.Create(ctx, provider(ns, "file://"+bareRemote(t))))
		older := target(ns, "main", "live")
		require.NoError(t, k8s.Create(ctx, older))
		waitCondition(t, older, func() []metav1.Condition { return older.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		time.Sleep(time.Second)                    // creation times are kept in seconds
		newer := target(ns, "main", "live/team-a") // no admission webhook here: as when created within its cache's lag
		newer.Name = "team-a"
		require.NoError(t, k8s.Create(ctx, newer))
		msg := waitCondition(t, newer, func() []metav1.Condition { return newer.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, `overlaps folder "live" of GitTarget `+ns+`/`+older.Name)
		requireStalled(t, newer.Status.Conditions, v1alpha1.ReasonFolderOverlap)
		kept := controller.KeptOut(ctx, k8s, older)
		assert.Contains(t, kept, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(newer)},
			"looked at again when the older target is deleted or edited, not at its next poll")
		assert.NotContains(t, kept, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(older)})
	})
	t.Run("leaves its folder to an older target that is not writing, and writes once that target is gone", func(t *testing.T) {
		ns := namespace(t)
		p := provider(ns, "file://"+bareRemote(t))
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "missing"} // the older target waits for its credentials
		require.NoError(t, k8s.Create(ctx, p))
		older := target(ns, "main", "live")
		require.NoError(t, k8s.Create(ctx, older))
		waitConditionSaying(t, older, func() []metav1.Condition { return older.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionFalse, "missing")
		time.Sleep(time.Second)           // creation times are kept in seconds
		other := provider(ns, p.Spec.URL) // another provider of the same repository
		other.Name = "same-repo"
		require.NoError(t, k8s.Create(ctx, other))
		newer := target(ns, "main", "live/team-a")
		newer.Name, newer.Spec.ProviderRef.Name = "team-a", other.Name
		require.NoError(t, k8s.Create(ctx, newer))
		// A reconcile before the cache holds the provider just made reads ProviderNotFound;
		// the provider's watch brings the overlap.
		msg := waitConditionSaying(t, newer, func() []metav1.Condition { return newer.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, "overlaps")
		assert.Contains(t, msg, `overlaps folder "live" of GitTarget `+ns+`/`+older.Name)
		requireStalled(t, newer.Status.Conditions, v1alpha1.ReasonFolderOverlap)
		require.NoError(t, k8s.Delete(ctx, older))
		waitCondition(t, newer, func() []metav1.Condition { return newer.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	})
	t.Run("is Stalled when the branch is not allowed", func(t *testing.T) {
		ns := namespace(t)
		require.NoError(t, k8s.Create(ctx, provider(ns, "file://"+bareRemote(t), "main", "env/*")))
		gt := target(ns, "feature", "live")
		require.NoError(t, k8s.Create(ctx, gt))
		msg := waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue)
		assert.Contains(t, msg, `branch "feature" is not in GitProvider`)
	})
	t.Run("stops writing while its provider's credentials Secret is gone, and writes again once it is back", func(t *testing.T) {
		ns := namespace(t)
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"username": []byte("bot")}}
		require.NoError(t, k8s.Create(ctx, creds))
		p := provider(ns, "file://"+bareRemote(t))
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "creds"}
		require.NoError(t, k8s.Create(ctx, p))
		gt := target(ns, "main", "live")
		require.NoError(t, k8s.Create(ctx, gt))
		key := client.ObjectKeyFromObject(gt)
		waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		_, registered := writer.Status(key)
		require.True(t, registered)

		require.NoError(t, k8s.Delete(ctx, creds))
		msg := waitConditionSaying(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, "creds not found")
		assert.Contains(t, msg, "GitProvider "+ns+"/repo")
		eventually(t, func() bool { _, registered = writer.Status(key); return !registered }) // after a grace for rotations

		require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: creds.Data}))
		waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		_, registered = writer.Status(key)
		assert.True(t, registered)
	})
	t.Run("stays Stalled for its template, not Reconciling for a grace, when its provider's credentials go meanwhile", func(t *testing.T) {
		ns := namespace(t)
		p := provider(ns, "file://"+bareRemote(t))
		p.Spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "creds"} // no such Secret
		require.NoError(t, k8s.Create(ctx, p))
		gt := target(ns, "main", "live")
		gt.Spec.CommitMessage.Single = `{{define "x"}}y{{end}}` // what the webhook refuses; it is not installed here
		require.NoError(t, k8s.Create(ctx, gt))
		msg := waitConditionSaying(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, "spec.commitMessage")
		assert.Contains(t, msg, "{{define}}")
		assert.Nil(t, apimeta.FindStatusCondition(gt.Status.Conditions, v1alpha1.ConditionReconciling), "no grace for credentials of a target that cannot write anyway")
	})
	t.Run("is Ready on an empty repository and on an allowed glob branch", func(t *testing.T) {
		ns := namespace(t)
		require.NoError(t, k8s.Create(ctx, provider(ns, "file://"+bareRemote(t), "main", "env/*")))
		gt := target(ns, "env/prod", "clusters/prod")
		require.NoError(t, k8s.Create(ctx, gt))
		waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
		assert.Equal(t, "5s", gt.Spec.CommitWindow.Quiet.Duration.String(), "quiet defaults to 5s")
	})
	t.Run("is Stalled naming the file when the folder holds a script, and recovers once it is removed", func(t *testing.T) {
		ns := namespace(t)
		remote := repotest.NewFileRemote(t)
		remote.Seed("main", map[string]string{"live/tools/run.sh": "#!/bin/sh\n", "other/run.sh": "ok outside the folder\n"}, "add scripts")
		require.NoError(t, k8s.Create(ctx, provider(ns, remote.URL)))
		gt := target(ns, "main", "live")
		require.NoError(t, k8s.Create(ctx, gt))
		// Saying the file: a reconcile before the cache has the GitProvider is Stalled a moment
		// for that (ProviderNotFound), then looks again.
		msg := waitConditionSaying(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionStalled, metav1.ConditionTrue, "live/tools/run.sh")
		assert.Contains(t, msg, "live/tools/run.sh")
		folder := apimeta.FindStatusCondition(gt.Status.Conditions, v1alpha1.ConditionFolderReady)
		require.NotNil(t, folder)
		assert.Equal(t, metav1.ConditionFalse, folder.Status)

		c := remote.Clone("main")
		c.Git("rm", "live/tools/run.sh")
		c.CommitAndPush("main", "remove the script")
		waitCondition(t, gt, func() []metav1.Condition { return gt.Status.Conditions }, v1alpha1.ConditionReady, metav1.ConditionTrue)
	})
}

func TestGitTargetValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := []struct {
		name, path, branch, resource, want string
	}{
		{"rejects a path that climbs out with ..", "live/../etc", "main", "", "path must not contain '.' or '..' segments"},
		{"rejects an absolute path, saying what a path looks like", "/live", "main", "", "path must be relative to the repository's root"},
		{"rejects a path with an empty segment, saying what a path looks like", "live//prod", "main", "", "e.g. clusters/prod"},
		{"rejects a branch with ..", "live", "a..b", "", "branch must be a valid Git branch name: no '..'"},
		{"rejects a branch with an empty part", "live", "env//prod", "", "no '/' at either end and no '//'"},
		{"rejects a branch ending in .", "live", "v1.", "", "no '.' at the end"},
		{"rejects a branch starting with -", "live", "-main", "", "no '-' at the start"},
		{"rejects a branch part starting with .", "live", "release/.x", "", "may start with '.' or end with '.lock'"},
		{"rejects a branch part ending in .lock", "live", "x.lock/y", "", "may start with '.' or end with '.lock'"},
		{"rejects a path with a .git segment in any letter case", "clusters/.GIT/prod", "main", "", "path must not contain a .git segment"},
		{"rejects a branch with a space, saying which characters a branch may hold", "live", "my branch", "", "branch may hold only letters, digits"},
		{"rejects a sensitive resource given as a kind, saying to use the plural name", "live", "main", "SealedSecret", "NAME column of kubectl api-resources"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gt := target(ns, tc.branch, tc.path)
			gt.Name = fmt.Sprintf("bad-%d", i)
			if tc.resource != "" {
				gt.Spec.Encryption = &v1alpha1.Encryption{SensitiveResources: []v1alpha1.GroupResource{{Group: "bitnami.com", Resource: tc.resource}}}
			}
			err := k8s.Create(ctx, gt)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "should match", "the API server's bare-regex message stays hidden")
		})
	}
	for i, quiet := range []string{"5 seconds", "-1s", "1d", "3000000h", "1h1h1h1h1h1h1h1h1"} {
		t.Run("rejects the window duration "+quiet+", saying how to write one", func(t *testing.T) {
			gt := target(ns, "main", "live")
			gt.Name = fmt.Sprintf("bad-duration-%d", i)
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gt)
			require.NoError(t, err)
			require.NoError(t, unstructured.SetNestedField(u, quiet, "spec", "commitWindow", "quiet"))
			obj := &unstructured.Unstructured{Object: u}
			obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("GitTarget"))
			err = k8s.Create(ctx, obj)
			require.Error(t, err, "the operator could not even decode it")
			assert.Contains(t, err.Error(), "such as 5s, 1m30s or 2h")
		})
	}
	t.Run("accepts 0 and a fraction", func(t *testing.T) {
		gt := target(ns, "main", "live")
		gt.Name = "good-durations"
		gt.Spec.CommitWindow.Quiet = &metav1.Duration{}
		gt.Spec.CommitWindow.MaxDelay = &metav1.Duration{Duration: 1500 * time.Millisecond}
		require.NoError(t, k8s.Create(ctx, gt))
		for i, spelled := range []string{"1h30m15s500ms", ".5s", "999999h", "100µs", "100μs", "0"} {
			_, err := time.ParseDuration(spelled)
			require.NoError(t, err, "Go reads %s", spelled)
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(target(ns, "main", "live"))
			require.NoError(t, err)
			require.NoError(t, unstructured.SetNestedField(u, spelled, "spec", "commitWindow", "quiet"))
			obj := &unstructured.Unstructured{Object: u}
			obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("GitTarget"))
			obj.SetName(fmt.Sprintf("spelled-%d", i))
			assert.NoError(t, k8s.Create(ctx, obj), "the API server takes %s, which Go reads", spelled)
		}
	})
	t.Run("keeps path and branch immutable", func(t *testing.T) {
		gt := target(ns, "main", "live")
		gt.Name = "immutable"
		require.NoError(t, k8s.Create(ctx, gt))
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(gt), gt); err != nil {
				return err
			}
			gt.Spec.Path = "elsewhere"
			return k8s.Update(ctx, gt)
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "path is immutable")
	})
}
