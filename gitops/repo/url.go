package repo

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// defaultPort is the port a scheme implies; it is dropped, so that
// https://h:443/r and https://h/r compare equal.
func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	case "ssh":
		return "22"
	case "git":
		return "9418"
	default:
		return ""
	}
}

// NormalizeURL returns a canonical form of a Git remote URL: the address and the account
// it is dialled as (the ssh user the credentials go with). "Is this the same repository?"
// is RepositoryKey, which leaves the account out. It is not meant to be dialled. Rules:
//
//   - surrounding spaces are trimmed; an unparseable address is returned trimmed, and an
//     opaque URL (which is never dialled) becomes a key of its own that holds nothing of it;
//   - scp-like "[user@]host:path" becomes "ssh://[user@]host/path", and an
//     absolute local path "/p" becomes "file:///p";
//   - "git+ssh" and "ssh+git" schemes become "ssh";
//   - scheme and host are lower-cased; the scheme's default port is dropped;
//   - user info is stripped, except that an ssh user name is kept (it selects
//     the account), never a password; an ssh URL without one gets "git", the user
//     the writer dials it as;
//   - query and fragment are dropped;
//   - repeated slashes in the path collapse, and trailing "/" is stripped, and so is
//     ".git" except in a file:// path, which names one directory exactly
//     ("/org/repo.git/" → "/org/repo" on a server); the path keeps its case, except on
//     hosting services that serve any case of it (caseInsensitivePaths).
//
// An scp-like path is read as absolute ("host:org/repo" is "host:/org/repo"), as Git
// hosting services serve both; on a plain SSH server the first is relative to the user's
// home: write such a repository as an ssh:// URL with its full path.
func NormalizeURL(raw string) string { return normalize(raw, true) }

// normalize is NormalizeURL, keeping an ssh user name only when sshUsers is set or the
// path starts in a home directory (RepositoryKey).
func normalize(raw string, sshUsers bool) string {
	s := strings.TrimSpace(raw)
	if s == "" {
		return ""
	}
	if opaque(s) {
		return opaqueKey(s)
	}
	s = toURLSyntax(s)
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return s
	}
	scheme := canonicalScheme(u.Scheme)
	var b strings.Builder
	b.WriteString(scheme + "://")
	path := canonicalPath(u.Path, scheme != "file")
	if scheme == "ssh" && (sshUsers || strings.HasPrefix(path, "/~")) {
		b.WriteString(sshUser(u) + "@")
	}
	host := canonicalHost(scheme, u)
	if caseInsensitivePaths(host) {
		path = strings.ToLower(path)
	}
	b.WriteString(host)
	b.WriteString(path)
	return b.String()
}

// caseInsensitivePaths reports whether host is a hosting service that serves a repository
// under any letter case of its path: "github.com/Org/Repo" is "github.com/org/repo" there,
// and must share its worker and folders. Elsewhere (a self-hosted server on a
// case-sensitive file system) the path keeps its case.
func caseInsensitivePaths(host string) bool {
	switch host {
	case "github.com", "gitlab.com", "bitbucket.org", "dev.azure.com", "ssh.dev.azure.com":
		return true
	}
	return false
}

// RepositoryKey names the repository raw addresses: one branch worker and clone per key
// and branch, and the folder overlap checks compare keys. It is NormalizeURL without an
// ssh user name. The user picks the account the writer dials as, not the repository: on
// AWS CodeCommit it is the SSH key's ID, so two GitProviders with keys of their own name
// one repository with two users, and must share its worker (each target still dials with
// its own key and user). A path under a home directory ("ssh://alice@host/~/repo",
// "alice@host:~/repo") is the exception: there the user picks the repository too, and is
// kept. Any other scp-like path is read from the root, as NormalizeURL says.
func RepositoryKey(raw string) string { return normalize(raw, false) }

// toURLSyntax rewrites scp-like addresses and local paths as URLs. An scp-like address
// ([user@]host:[port:]path) is read by go-git's own parser, since that is what it dials:
// scp-like only when the first colon comes before any slash, a port of one to five digits
// between two colons (22 when there is none), and a one-letter host a host (git for Windows
// reads a drive letter, and so does go-git there).
func toURLSyntax(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	if strings.HasPrefix(s, "/") {
		return "file://" + s
	}
	ep, err := transport.NewEndpoint(s)
	if err != nil || ep.Protocol != "ssh" {
		return s // a relative path, or nothing go-git can dial
	}
	u := url.URL{Scheme: "ssh", Host: net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)), Path: "/" + strings.TrimLeft(ep.Path, "/")}
	if ep.User != "" {
		u.User = url.User(ep.User)
	}
	return u.String()
}

// canonicalScheme lower-cases the scheme and folds ssh aliases.
func canonicalScheme(s string) string {
	s = strings.ToLower(s)
	if s == "git+ssh" || s == "ssh+git" {
		return "ssh"
	}
	return s
}

// canonicalHost lower-cases the host and drops the scheme's default port.
func canonicalHost(scheme string, u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6 literal
	}
	if port := u.Port(); port != "" && port != defaultPort(scheme) {
		host += ":" + port
	}
	return host
}

// canonicalPath collapses repeated slashes and strips trailing "/", and ".git" when
// dotGit is set.
func canonicalPath(p string, dotGit bool) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	for {
		trimmed := strings.TrimSuffix(p, "/")
		if dotGit {
			trimmed = strings.TrimSuffix(trimmed, ".git")
		}
		if trimmed == p {
			return p
		}
		p = trimmed
	}
}

// HasCredentials reports whether a repository URL carries a secret: any user info of an
// http(s) URL (a token is often the user name alone), the password of any other, a query
// (`?private_token=…`), or a URL whose parts cannot be told apart (opaque). An ssh user name
// alone selects an account and is no secret. A GitProvider holding such a URL never goes to
// Git in plaintext, whichever rule routes it (batch.URLCredentialsProblem).
func HasCredentials(raw string) bool {
	if opaque(raw) {
		return true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return false // scp-like "git@host:path" does not parse, and holds no password
	}
	if u.RawQuery != "" {
		return true
	}
	if u.User == nil {
		return false
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	return u.Scheme == "http" || u.Scheme == "https"
}

// Redact is a repository URL fit for a message (status, Event, log, admission answer):
// its user info is dropped — a token may be the password or the user name alone — and so
// are its query and fragment. Anything else is kept as written. Credentials belong in the
// GitProvider's Secret, but a URL that carries them must not spread them. A URL that does
// not parse (a password with characters a URL must escape) loses whatever may be user info
// or a query, and so does one where an "@" follows the host (opaque, redactUnparsed).
func Redact(raw string) string {
	if opaque(raw) {
		return redactUnparsed(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw // scp-like "git@host:path" does not parse, and holds no password
	}
	if u.Scheme == "" || (u.User == nil && u.RawQuery == "" && u.Fragment == "") {
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// opaque reports whether raw, a URL with "://", cannot be taken apart reliably: it does not
// parse, or an "@" follows its host in a URL that can carry credentials (a token holding
// "/", "?" or "#" makes url.Parse read the rest of the user info as path, query or
// fragment, with the token in it). Its credentials cannot be told apart, so it is never
// dialled (ErrOpaqueURL), and shown only as redactUnparsed gives it. A file:// path may hold
// "@". An address without "://" (scp-like, a local path) is opaque only as scpPassword says.
func opaque(raw string) bool {
	i := strings.Index(raw, "://")
	if i < 0 {
		return scpPassword(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	if u.Scheme == "file" {
		return false
	}
	// As written, as the API server's rule reads it: an "@" anywhere after the authority.
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	return end >= 0 && strings.Contains(rest[end:], "@")
}

// scpPassword reports whether raw, an address without "://", reads as scp-like
// "user:password@host:path": a colon before its first "@", no "/" before that colon (else
// it is a local path, as go-git reads it) and the host's colon after the "@" (else the "@" is
// in the path of "host:team@x/repo"). Git's scp-like syntax has no password, but one
// written there is a secret all the same, and url.Parse reads "user" as the scheme and the
// rest as opaque data, which hid it from HasCredentials and Redact.
func scpPassword(raw string) bool {
	at := strings.IndexByte(raw, '@')
	colon := strings.IndexByte(raw, ':')
	slash := strings.IndexByte(raw, '/')
	return at > 0 && colon >= 0 && colon < at && (slash < 0 || slash > colon) && strings.Contains(raw[at+1:], ":")
}

// opaqueKey is NormalizeURL of an opaque URL: one key per URL as written, so that it shares
// no branch worker or clone with another, holding nothing of it (it is logged).
func opaqueKey(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return "opaque-url:" + hex.EncodeToString(sum[:8])
}

// redactUnparsed is Redact for an opaque URL: after "://", everything up to the
// last "@" goes (a password may hold "/" or "?", so the host's end cannot be told), and so
// does everything from the first "?" or "#" after that. Without "://" (an scp-like address
// with a password) everything up to the last "@" goes. It may take more than the
// credentials, never less.
func redactUnparsed(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw[strings.LastIndex(raw, "@")+1:]
	}
	scheme, rest := raw[:i+3], raw[i+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if end := strings.IndexAny(rest, "?#"); end >= 0 {
		rest = rest[:end]
	}
	return scheme + rest
}

// redactedError is an error whose message had credentials removed; errors.Is and As still
// see what it wraps.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// scrub removes raw's credentials wherever err's message repeats them: go-git and Go's HTTP
// client quote the URL they requested, user info and query included (go-git glues its
// "/info/refs" after the query), and a URL that does not parse is quoted whole. It also
// drops local addresses (hideSourceAddrs), so the message is the same at every attempt.
func scrub(err error, raw string) error {
	if err == nil {
		return nil
	}
	msg := hideSourceAddrs(err.Error())
	for _, form := range credentialForms(raw) {
		msg = strings.ReplaceAll(msg, form, "")
	}
	if redacted := Redact(raw); redacted != raw {
		quoted := strconv.Quote(raw) // as fmt's %q quotes it, in url.Error
		msg = strings.ReplaceAll(strings.ReplaceAll(msg, raw, redacted), quoted[1:len(quoted)-1], redacted)
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// credentialForms are the ways raw's credentials can appear in a message: its user info and
// its query, as written, escaped and unescaped. None for a URL that does not parse: scrub
// then replaces the URL whole.
func credentialForms(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var forms []string
	if u.User != nil {
		for _, info := range userInfoForms(raw, u) {
			if info != "@" { // an empty user name: its password form covers it
				forms = append(forms, info)
			}
		}
	}
	if u.RawQuery != "" { // with its "?", so that a short query does not match words elsewhere
		forms = append(forms, "?"+u.RawQuery)
		if q, err := url.QueryUnescape(u.RawQuery); err == nil && q != u.RawQuery {
			forms = append(forms, "?"+q)
		}
	}
	if u.Fragment != "" { // with its "#", as for the query
		forms = append(forms, "#"+u.EscapedFragment(), "#"+u.Fragment)
	}
	return forms
}

// userInfoForms are the ways raw's user info can appear in a message: as written, escaped
// and unescaped, each with its "@".
func userInfoForms(raw string, u *url.URL) []string {
	forms := []string{u.User.String() + "@", u.User.Username() + "@"}
	if pw, ok := u.User.Password(); ok {
		forms = append([]string{u.User.Username() + ":" + pw + "@"}, forms...)
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if j := strings.LastIndex(rest[:hostEnd(rest)], "@"); j >= 0 {
			forms = append([]string{rest[:j+1]}, forms...)
		}
	}
	return forms
}

// hostEnd is where the authority of a URL without its scheme ends.
func hostEnd(rest string) int {
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		return j
	}
	return len(rest)
}
