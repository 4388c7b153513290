package repo

// SetCompactionThresholds lets tests make compaction due without thousands of commits.
func (r *Repo) SetCompactionThresholds(loose, packs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.compactAt = compactionThresholds{loose: loose, packs: packs}
}
