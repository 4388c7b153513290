package repo

// MaxOpenPackfiles exposes the bound on a store's open packfiles to the tests.
const MaxOpenPackfiles = maxOpenPackfiles
