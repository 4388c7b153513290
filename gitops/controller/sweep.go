package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// Sweeper is the part of batch.Manager the CloneSweeper drives.
type Sweeper interface {
	SweepClones(inUse []batch.Clone) ([]string, error)
}

// CloneSweeper deletes, once when this replica starts leading, the local clones of
// GitTargets deleted (or moved to another repository) while no replica ran:
// the writer deletes the others as it sees their last target go, but these it never saw,
// and each would keep a repository's branch on disk for good.
type CloneSweeper struct {
	// Reader reads the API server directly: the list must be complete, which a cache
	// still filling is not.
	Reader client.Reader
	Writer Sweeper
	Log    logr.Logger
	// Backoff paces the retries of a list that failed (the API server not reachable yet);
	// the zero value is a second, doubling up to six tries.
	Backoff wait.Backoff
}

// Start lists the GitTargets and sweeps. A sweep that cannot list is skipped, not
// retried forever: the clones it would delete cost disk, not correctness.
func (s *CloneSweeper) Start(ctx context.Context) error {
	backoff := s.Backoff
	if backoff.Steps == 0 {
		backoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6}
	}
	var inUse []batch.Clone
	var listErr error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		inUse, listErr = ClonesInUse(ctx, s.Reader)
		return listErr == nil, nil
	})
	if err != nil {
		if listErr != nil {
			err = listErr
		}
		s.Log.Info("local clones not swept: the GitTargets could not be listed", "reason", err.Error())
		return nil
	}
	removed, err := s.Writer.SweepClones(inUse)
	for _, dir := range removed {
		s.Log.Info("deleted a local clone no GitTarget uses", "clone", dir)
	}
	if err != nil {
		s.Log.Error(err, "sweeping local clones")
	}
	return nil
}

// NeedLeaderElection sweeps on the leader only, where the writer runs.
func (s *CloneSweeper) NeedLeaderElection() bool { return true }

// ClonesInUse lists the repository, branch and folder of every GitTarget. A target whose
// GitProvider is missing has no repository (URL ""): no clone is kept for it, and once it
// has one, it clones it; its folder's saved index is kept wherever it is.
func ClonesInUse(ctx context.Context, r client.Reader) ([]batch.Clone, error) {
	var providers v1alpha1.GitProviderList
	if err := r.List(ctx, &providers); err != nil {
		return nil, fmt.Errorf("listing GitProviders: %w", err)
	}
	var targets v1alpha1.GitTargetList
	if err := r.List(ctx, &targets); err != nil {
		return nil, fmt.Errorf("listing GitTargets: %w", err)
	}
	urls := make(map[types.NamespacedName]string, len(providers.Items))
	for _, p := range providers.Items {
		urls[client.ObjectKeyFromObject(&p)] = p.Spec.URL
	}
	inUse := make([]batch.Clone, 0, len(targets.Items))
	for _, t := range targets.Items {
		url := urls[types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.ProviderRef.Name}]
		inUse = append(inUse, batch.Clone{URL: url, Branch: t.Spec.Branch, Folder: t.Spec.Path, Target: client.ObjectKeyFromObject(&t)})
	}
	return inUse, nil
}
