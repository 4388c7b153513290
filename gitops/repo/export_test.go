package repo

// MaxOpenPackfiles exposes the bound on a store's open packfiles to the tests.
const MaxOpenPackfiles = maxOpenPackfiles

// TreesRead is how many trees the finder's last search read.
func (f *FileFinder) TreesRead() int { return f.read }
