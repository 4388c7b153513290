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
	ok := Options{WebhookFailure: "Ignore", WebhookTimeout: 3, WebhookPort: 0}
	require.NoError(t, ok.check())
	policy := ok
	policy.WebhookFailure = "ignore"
	assert.ErrorContains(t, policy.check(), "--webhook-failure-policy must be Ignore or Fail")
	timeout := ok
	timeout.WebhookTimeout = 0
	assert.ErrorContains(t, timeout.check(), "--webhook-timeout-seconds must be between 1 and 30")
}
