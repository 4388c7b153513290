package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
