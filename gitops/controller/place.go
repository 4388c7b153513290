package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitops-reverser/gitops-reverser/api/v1alpha1"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
	"github.com/gitops-reverser/gitops-reverser/gitops/repo"
)

// Place is where a GitTarget writes. Admission compares places so that two targets never
// write (and prune) the same files; the reconciler compares them again, since admission
// reads a cache and may be off.
type Place struct {
	Key    types.NamespacedName
	URL    string // repo.RepositoryKey
	Branch string
	Folder string
	// Created orders claims: of two overlapping targets the older keeps the folder.
	Created time.Time
	// LastURL is, while the provider does not exist, the repo.RepositoryKey of the repository
	// the target last resolved (status.repository): it keeps its folder there meanwhile.
	LastURL string
}

// Overlaps reports whether two places would write the same files: same repository and
// branch, and folders equal or one inside the other.
func Overlaps(a, b Place) bool {
	if !sameRepository(a, b) || a.Branch != b.Branch {
		return false
	}
	fa, fb := strings.Trim(a.Folder, "/")+"/", strings.Trim(b.Folder, "/")+"/"
	return strings.HasPrefix(fa, fb) || strings.HasPrefix(fb, fa)
}

// sameRepository says whether two places are on one repository: the same URL (two targets
// of one missing provider share its stand-in), or, when either's provider is gone, the
// repository it last resolved. status.repository is redacted, which drops an ssh URL's
// user, so those are compared without it.
func sameRepository(a, b Place) bool {
	if a.URL == b.URL {
		return true
	}
	ra, rb, fromStatus := a.URL, b.URL, false
	if a.LastURL != "" {
		ra, fromStatus = a.LastURL, true
	}
	if b.LastURL != "" {
		rb, fromStatus = b.LastURL, true
	}
	return fromStatus && withoutSSHUser(ra) == withoutSSHUser(rb)
}

// withoutSSHUser drops the user of a normalised ssh URL. Pure.
func withoutSSHUser(u string) string {
	rest, ok := strings.CutPrefix(u, "ssh://")
	if !ok {
		return u
	}
	if at, slash := strings.Index(rest, "@"), strings.Index(rest+"/", "/"); at >= 0 && at < slash {
		return "ssh://" + rest[at+1:]
	}
	return u
}

// TargetPlace is where a GitTarget writes: its provider's repo.RepositoryKey, or, while the
// provider does not exist, a stand-in naming the provider (two targets of it share it).
func TargetPlace(t *v1alpha1.GitTarget, provider *v1alpha1.GitProvider) Place {
	url, last := "gitprovider:"+t.Namespace+"/"+t.Spec.ProviderRef.Name, ""
	if provider != nil {
		url = repo.RepositoryKey(provider.Spec.URL)
	} else if t.Status.Repository != "" {
		last = repo.RepositoryKey(t.Status.Repository) // redacted: the key drops credentials anyway
	}
	return Place{Key: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}, URL: url, Branch: t.Spec.Branch,
		Folder: t.Spec.Path, Created: t.CreationTimestamp.Time, LastURL: last}
}

// older orders places by age, then by name, as the writer does (batch.ErrFolderOverlap).
func older(a, b Place) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return strings.Compare(a.Key.String(), b.Key.String())
}

// FolderHolder says which target keeps the folder me writes to: the oldest overlapping
// place not itself shut out by an older one (a target refused for its folder claims
// nothing). ok is false when me holds its folder. Pure: the reconciler hands it every
// GitTarget from its cache, so a target keeps its folder while it does not write (its
// provider's credentials missing, its provider gone — by the repository it last resolved —,
// the operator restarting), which the writer, seeing only registered targets, cannot tell.
func FolderHolder(me Place, all []Place) (holder Place, ok bool) {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, older)
	var holders []Place
	for _, p := range sorted {
		if p.Key == me.Key {
			continue
		}
		if older(p, me) > 0 {
			break
		}
		if !slices.ContainsFunc(holders, func(h Place) bool { return Overlaps(h, p) }) {
			holders = append(holders, p)
		}
	}
	for _, h := range holders {
		if Overlaps(h, me) {
			return h, true
		}
	}
	return Place{}, false
}

// ListPlaces reads every GitProvider and the place of every GitTarget from c (a cache),
// for comparing places: the providers by name, and the places. A GitTarget being deleted
// (kept by finalizers) has stopped writing and holds no place.
func ListPlaces(ctx context.Context, c client.Reader) (map[types.NamespacedName]*v1alpha1.GitProvider, []Place, error) {
	var providers v1alpha1.GitProviderList
	if err := c.List(ctx, &providers); err != nil {
		return nil, nil, fmt.Errorf("listing GitProviders: %w", err)
	}
	var targets v1alpha1.GitTargetList
	if err := c.List(ctx, &targets); err != nil {
		return nil, nil, fmt.Errorf("listing GitTargets: %w", err)
	}
	byName := make(map[types.NamespacedName]*v1alpha1.GitProvider, len(providers.Items))
	for i := range providers.Items {
		byName[types.NamespacedName{Namespace: providers.Items[i].Namespace, Name: providers.Items[i].Name}] = &providers.Items[i]
	}
	places := make([]Place, 0, len(targets.Items))
	for i := range targets.Items {
		o := &targets.Items[i]
		if !o.DeletionTimestamp.IsZero() {
			continue
		}
		places = append(places, TargetPlace(o, byName[types.NamespacedName{Namespace: o.Namespace, Name: o.Spec.ProviderRef.Name}]))
	}
	return byName, places, nil
}

// folderHolder returns batch.ErrFolderOverlap, saying which older GitTarget keeps the
// folder t writes to, or nil. A target being deleted holds none: it stopped writing when
// its deletion began (its generation changed then, which looks at those it kept out).
func (r *GitTargetReconciler) folderHolder(ctx context.Context, t *v1alpha1.GitTarget, p *v1alpha1.GitProvider) error {
	_, all, err := ListPlaces(ctx, r.Client)
	if err != nil {
		return err
	}
	me := TargetPlace(t, p)
	h, ok := FolderHolder(me, all)
	if !ok {
		return nil
	}
	return batch.FolderOverlapError(me.Key, me.Folder, h.Key, h.Folder)
}
