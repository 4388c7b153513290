package repo

import (
	"io"
	"net/http"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// maxHTTPErrorBody bounds what is read of a Git server's answer that is not a success.
const maxHTTPErrorBody = 64 << 10

// BoundHTTPErrorBodies makes go-git's http and https transports read at most 64 KiB of an
// answer that is not a success. go-git quotes such a body in its error, reading all of it
// into memory first: a server a GitProvider names (anyone who may create one can name any)
// could answer 401 with an endless body and exhaust the operator's memory, and stop its
// writing for every GitTarget. go-git's protocol table is the process's, so main calls
// this once at start, as it silences sops' logs; redirects keep go-git's own policy (those
// of the first request followed, credentials dropped when the origin changes), which it
// applies to the client it is given. go-git's per-request TLS and proxy options (CA
// bundle, client certificate, InsecureSkipTLS, ProxyOptions for http) need the client's
// transport to be an *http.Transport: with this one they fail with go-git's error, since
// the client has no transport cache (asked for explicitly, not left to go-git's default:
// with one, go-git assumes the type and would panic).
// None is used for http today, and adding one means wrapping differently.
func BoundHTTPErrorBodies() {
	t := githttp.NewClientWithOptions(&http.Client{Transport: boundedErrors{next: http.DefaultTransport}}, nil)
	client.InstallProtocol("http", t)
	client.InstallProtocol("https", t)
}

// boundedErrors cuts the body of an answer that is not a success at maxHTTPErrorBody.
type boundedErrors struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b boundedErrors) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil || (resp.StatusCode >= 200 && resp.StatusCode < 300) || resp.Body == nil {
		return resp, err
	}
	resp.Body = cutBody{Reader: io.LimitReader(resp.Body, maxHTTPErrorBody), Closer: resp.Body}
	return resp, nil
}

// cutBody reads at most a bound of a response body and closes the whole of it.
type cutBody struct {
	io.Reader
	io.Closer
}
