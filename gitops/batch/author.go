package batch

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitops-reverser/gitops-reverser/gitops/manifest"
)

// DefaultAuthorEmailDomain completes the e-mail address of a Kubernetes user whose name is
// not an address already (kubernetes-admin, system:serviceaccount:ci:deployer).
const DefaultAuthorEmailDomain = "cluster.local"

// Reasons of a CommitRequest's Committed condition, set by the writer.
const (
	ReasonCommitted       = "Committed"
	ReasonNothingToCommit = "NothingToCommit"
	ReasonTimedOut        = "TimedOut"
	ReasonTargetRemoved   = "TargetRemoved"
	// ReasonRetrying is not final: the commit carrying the message, or one the target's
	// commits wait behind, failed (the remote refused or could not be reached) and is
	// retried with backoff.
	ReasonRetrying = "Retrying"
	// ReasonTargetStalled is not final either: the author's changes wait with the message
	// because the target's folder cannot be written; they commit once it is fixed.
	ReasonTargetStalled = "TargetStalled"
)

// authorSignature is the Git author of a window: the Kubernetes user the API server
// authenticated for its changes, or the committer when nobody could be joined (changes
// made while the operator was down, snapshots, requests the webhook did not see). Git
// forbids only '<', '>' and newlines in names and addresses; a username that is not an
// address becomes one under domain, with characters outside [A-Za-z0-9._+-] as '-'.
func authorSignature(username string, committer Identity, domain string, when time.Time) object.Signature {
	name := strings.TrimSpace(strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, username))
	if name == "" { // Git refuses a blank name: the commit would fail on every retry
		return object.Signature{Name: committer.Name, Email: committer.Email, When: when}
	}
	if domain == "" {
		domain = DefaultAuthorEmailDomain
	}
	email := name
	if at := strings.LastIndexByte(name, '@'); at <= 0 || at == len(name)-1 || strings.ContainsAny(name, " :/#") {
		email = emailLocalPart(name) + "@" + domain
	}
	return object.Signature{Name: name, Email: email, When: when}
}

func emailLocalPart(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '+', r == '-':
			return r
		}
		return '-'
	}, name)
}

// maxCoAuthors bounds a commit's Co-authored-by trailers: a window of objects many people
// created, all touched by one operator, names the first, sorted.
const maxCoAuthors = 20

// coAuthorsOf are the people a commit of win credits besides its author: those whose
// change of an object it writes left their window for win (queue.coAuthors), sorted, at
// most maxCoAuthors. Pure.
func coAuthorsOf(win *authorWindow, actions []action) []string {
	written := make(map[manifest.Identity]bool, len(actions))
	for _, a := range actions {
		written[a.id] = true
	}
	var out []string
	for k, names := range win.coAuthors {
		if !written[k.Identity()] {
			continue
		}
		for _, n := range names {
			if n != win.author && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out[:min(len(out), maxCoAuthors)]
}

// credited is names, sorted, with n added (not when empty or there already), keeping the
// keptCoAuthors first: an object many people change in turn while Git is away credits
// the same names as with all of them kept, since a commit names at most the maxCoAuthors
// first of its objects' people, less its author. Pure.
func credited(names []string, n string) []string {
	if n == "" {
		return names
	}
	i, found := slices.BinarySearch(names, n)
	if found || i >= keptCoAuthors {
		return names
	}
	names = slices.Insert(names, i, n)
	return names[:min(len(names), keptCoAuthors)]
}

// keptCoAuthors is how many names a waiting object keeps for its credits (credited): one
// more than a commit names, for the commit's author among them.
const keptCoAuthors = maxCoAuthors + 1

// coAuthoredBy starts the trailer withCoAuthors writes.
const coAuthoredBy = "Co-authored-by: "

// withCoAuthors ends msg with a Co-authored-by trailer for each name, as authorSignature
// writes them (GitHub and GitLab show such a commit under every one of them): in the
// message's own trailer block when it ends with one (a request's Signed-off-by), so that
// git still reads that block as trailers, else after a blank line. Pure.
func withCoAuthors(msg string, names []string, committer Identity, domain string, when time.Time) string {
	if len(names) == 0 {
		return msg
	}
	body := strings.TrimRight(msg, " \t\n")
	var lines []string
	for _, n := range names {
		sig := authorSignature(n, committer, domain, when)
		line := fmt.Sprintf("%s%s <%s>", coAuthoredBy, sig.Name, sig.Email)
		if !slices.Contains(strings.Split(body, "\n"), line) { // a request's message may credit them already
			lines = append(lines, line+"\n")
		}
	}
	if len(lines) == 0 {
		return msg
	}
	sep := "\n\n"
	if endsWithTrailers(body) {
		sep = "\n"
	}
	return body + sep + strings.Join(lines, "")
}

// endsWithTrailers says whether msg's last paragraph, after a first one, is all
// "Token: value" lines, as git reads a trailer block. Pure.
func endsWithTrailers(msg string) bool {
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		return false
	}
	for _, line := range strings.Split(msg[i+2:], "\n") {
		token, _, ok := strings.Cut(line, ": ")
		if !ok || token == "" || strings.ContainsFunc(token, func(r rune) bool {
			return !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) {
			return false
		}
	}
	return true
}

// withoutCoAuthors are a commit message, trimmed, and the message without each further
// trailing Co-authored-by line: withCoAuthors may have ended a request's own such lines
// with its own, so what a request's message is looked for in is one of them. Pure.
func withoutCoAuthors(msg string) []string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	out := []string{strings.Join(lines, "\n")}
	for len(lines) > 1 && strings.HasPrefix(lines[len(lines)-1], coAuthoredBy) {
		lines = lines[:len(lines)-1]
		out = append(out, strings.TrimSpace(strings.Join(lines, "\n")))
	}
	return out
}
