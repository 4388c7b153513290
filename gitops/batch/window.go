package batch

import "time"

// WindowConfig says when a commit window closes; see GitTarget spec.commitWindow.
type WindowConfig struct {
	// Quiet closes the window after this much silence; 0 commits each change at once.
	Quiet time.Duration
	// MaxDelay closes the window once its first change is this old, so a trickle commits.
	MaxDelay time.Duration
	// MaxChanges closes the window once it holds this many distinct objects.
	MaxChanges int
}

// Window is the state of one open window: when it opened, when it last grew, how big it is.
type Window struct {
	First time.Time
	Last  time.Time
	Count int
}

// Due decides whether the window must commit at now; when it need not, it returns how long
// until it must, so the worker can sleep exactly that long. An empty window is never due.
func Due(w Window, cfg WindowConfig, now time.Time) (bool, time.Duration) {
	if w.Count == 0 {
		return false, 0
	}
	if cfg.MaxChanges > 0 && w.Count >= cfg.MaxChanges {
		return true, 0
	}
	wait := w.Last.Add(cfg.Quiet).Sub(now)
	if cfg.MaxDelay > 0 {
		if byAge := w.First.Add(cfg.MaxDelay).Sub(now); byAge < wait {
			wait = byAge
		}
	}
	if wait <= 0 {
		return true, 0
	}
	return false, wait
}
