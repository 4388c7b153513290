package main

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

func TestAListFlagRepeatedKeepsEveryValueAndReplacesItsDefault(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.bind(fs)
	require.NoError(t, fs.Parse([]string{
		"--sensitive-resources=sealedsecrets.bitnami.com", "--sensitive-resources", "foos.example.com, bars.example.com",
		"--webhook-skip-users=ci-bot",
	}))
	assert.Equal(t, stringList{"sealedsecrets.bitnami.com", "foos.example.com", "bars.example.com"}, o.SensitiveResources,
		"a chart rendering one flag per item keeps them all")
	sensitive := o.sensitive()
	for _, gr := range []schema.GroupResource{{Resource: "secrets"}, {Group: "bitnami.com", Resource: "sealedsecrets"}, {Group: "example.com", Resource: "foos"}} {
		assert.True(t, sensitive(gr), gr.String())
	}
	assert.Equal(t, stringList{"ci-bot"}, o.WebhookSkipUsers, "the first use replaces the default")
}

func TestASensitiveResourceNameTheAPIServerCouldNeverServeIsRefusedAtStart(t *testing.T) {
	for _, name := range []string{"SealedSecrets.bitnami.com", "sealedsecrets.bitnami.com/v1", "sealed secrets.bitnami.com", ".bitnami.com",
		"sealedsecrets..bitnami.com", "sealed_secrets.bitnami.com", "sealedsecrets.bitnami.com."} {
		err := (&Options{SensitiveResources: stringList{name}}).checkSensitive()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "plural, lowercase, resource.group")
	}
	assert.NoError(t, (&Options{SensitiveResources: stringList{"sealedsecrets.bitnami.com", "configmaps"}}).checkSensitive())
}

func TestWebhookTimeoutOutsideTheAPIServersRangeIsRefusedAtStart(t *testing.T) {
	for _, seconds := range []int{0, -1, 31, 60} {
		_, err := (&Options{WebhookTimeout: seconds}).webhookTimeout()
		require.Error(t, err, "%d", seconds)
		assert.Contains(t, err.Error(), "--webhook-timeout-seconds must be between 1 and 30")
	}
	for _, seconds := range []int{1, 3, 30} {
		got, err := (&Options{WebhookTimeout: seconds}).webhookTimeout()
		require.NoError(t, err)
		assert.Equal(t, int32(seconds), got)
	}
}

func TestAnIntervalOrBoundThatIsNotPositiveIsTheDefault(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.bind(fs)
	require.NoError(t, fs.Parse([]string{"--git-poll-interval=0", "--provider-check-interval=-1s", "--git-timeout=0"}))
	assert.Equal(t, defaultGitPollInterval, positiveOr(o.GitPollInterval, defaultGitPollInterval),
		"a RequeueAfter of 0 would never fetch again")
	assert.Equal(t, defaultProviderCheckInterval, positiveOr(o.ProviderCheckInterval, defaultProviderCheckInterval))
	assert.Equal(t, batch.DefaultGitTimeout, o.gitTimeout())
	assert.Equal(t, 30*time.Second, positiveOr(30*time.Second, defaultGitPollInterval))
}

func TestAWebhookFlagItCouldNotRunWithStopsTheOperatorAlsoWithTheWebhooksOff(t *testing.T) {
	ok := Options{WebhookFailure: "Ignore", WebhookTimeout: 3, WebhookPort: 0, WorkDir: "/var/cache/clones", WebhookConfigName: "gitops-reverser"}
	require.NoError(t, ok.check())
	policy := ok
	policy.WebhookFailure = "ignore"
	assert.ErrorContains(t, policy.check(), "--webhook-failure-policy must be Ignore or Fail")
	timeout := ok
	timeout.WebhookTimeout = 0
	assert.ErrorContains(t, timeout.check(), "--webhook-timeout-seconds must be between 1 and 30")
}

func TestAPlaceTheOperatorCouldNotRunWithIsRefusedAtStartNamingItsFlag(t *testing.T) {
	ok := Options{WebhookFailure: "Ignore", WebhookTimeout: 3, WebhookPort: 9443, Namespace: "ops", WorkDir: "/var/cache/clones",
		WebhookConfigName: "gitops-reverser"}
	require.NoError(t, ok.check())
	cases := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"refuses a negative webhook port, which controller-runtime takes for no server at all",
			func(o *Options) { o.WebhookPort = -1 }, "--webhook-port must be 0 (webhooks off) or a port from 1 to 65535, not -1"},
		{"refuses a webhook port above 65535", func(o *Options) { o.WebhookPort = 70000 }, "--webhook-port"},
		{"refuses webhooks without the operator's namespace", func(o *Options) { o.Namespace = "" }, "--namespace (or $POD_NAMESPACE) is empty"},
		{"refuses leader election without a namespace for its Lease",
			func(o *Options) { o.Namespace, o.WebhookPort, o.LeaderElect = "", 0, true }, "--leader-elect needs a namespace"},
		{"refuses an empty work directory", func(o *Options) { o.WorkDir = "" }, "--work-dir is empty"},
		{"refuses an advertise address without a port", func(o *Options) { o.AdvertiseAddress = "10.0.0.5" }, `--advertise-address must be host:port`},
		{"refuses an advertise address without a host, at which each replica would reach only itself",
			func(o *Options) { o.AdvertiseAddress = ":9443" }, `not ":9443"`},
		{"refuses an advertise address whose port is not a number", func(o *Options) { o.AdvertiseAddress = "10.0.0.5:https" }, `not "10.0.0.5:https"`},
		{"refuses an advertise address with port 0", func(o *Options) { o.AdvertiseAddress = "10.0.0.5:0" }, "a port from 1 to 65535"},
		{"refuses a namespace the API server could never hold", func(o *Options) { o.Namespace = "Ops_Team" }, `--namespace (or $POD_NAMESPACE) "Ops_Team" is not a namespace name`},
		{"refuses an empty webhook configuration name, whose rules would never be kept",
			func(o *Options) { o.WebhookConfigName = "" }, "--webhook-configuration-name is empty"},
		{"refuses a webhook configuration name also with the webhooks off",
			func(o *Options) { o.WebhookConfigName, o.WebhookPort = "Not A Name", 0 }, "--webhook-configuration-name"},
		{"refuses a mutating webhook configuration name the API server could never hold",
			func(o *Options) { o.MutatingWebhookConfigName = "-bad" }, "--mutating-webhook-configuration-name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.change(&o)
			assert.ErrorContains(t, o.check(), tc.want)
		})
	}
	t.Run("takes a Lease in --leader-election-namespace without --namespace", func(t *testing.T) {
		o := ok
		o.Namespace, o.WebhookPort, o.LeaderElect, o.LeaderElectionNS = "", 0, true, "ops"
		assert.NoError(t, o.check())
	})
	t.Run("takes an advertise address with a port", func(t *testing.T) {
		o := ok
		o.AdvertiseAddress = "[fd00::5]:9443"
		assert.NoError(t, o.check())
	})
}
