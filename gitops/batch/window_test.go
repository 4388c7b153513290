package batch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := WindowConfig{Quiet: 5 * time.Second, MaxDelay: 30 * time.Second, MaxChanges: 3}
	cases := []struct {
		name     string
		w        Window
		cfg      WindowConfig
		now      time.Time
		due      bool
		nextWait time.Duration
	}{
		{"never closes an empty window", Window{}, cfg, t0.Add(time.Hour), false, 0},
		{"waits for the quiet period after the last change", Window{t0, t0.Add(2 * time.Second), 1}, cfg, t0.Add(3 * time.Second), false, 4 * time.Second},
		{"closes after the quiet period", Window{t0, t0, 1}, cfg, t0.Add(5 * time.Second), true, 0},
		{"closes a busy window at maxDelay although changes keep coming", Window{t0, t0.Add(29 * time.Second), 2}, cfg, t0.Add(30 * time.Second), true, 0},
		{"sleeps only until maxDelay when that comes first", Window{t0, t0.Add(28 * time.Second), 2}, cfg, t0.Add(29 * time.Second), false, time.Second},
		{"closes at maxChanges at once", Window{t0, t0, 3}, cfg, t0, true, 0},
		{"commits each change at once with quiet 0s", Window{t0, t0, 1}, WindowConfig{MaxDelay: 30 * time.Second}, t0, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			due, wait := Due(tc.w, tc.cfg, tc.now)
			assert.Equal(t, tc.due, due)
			assert.Equal(t, tc.nextWait, wait)
		})
	}
}

func TestUntilDue(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		due  time.Time
		want time.Duration
	}{
		{name: "sleeps until a deadline still ahead", due: now.Add(29 * time.Second), want: 29 * time.Second},
		{name: "takes at once a deadline that passed while other windows were pushed, without a busy loop", due: now.Add(-25 * time.Second), want: time.Millisecond},
		{name: "takes at once a deadline that is now", due: now, want: time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, untilDue(tt.due, now))
		})
	}
}
